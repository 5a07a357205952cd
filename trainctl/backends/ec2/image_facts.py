"""What the launch reads about the image its nodes boot (DescribeImages), rather than assuming it.

The root volume: a launch template's block device mapping replaces the image's root only under the image's own
root device name, "/dev/sda1 or /dev/xvda, differs by AMI" (EC2 User Guide, "Device names on Amazon EC2
instances": `aws ec2 describe-images --query 'Images[].RootDeviceName'`). Amazon Linux images boot from
/dev/xvda, Ubuntu ones from /dev/sda1; a mapping under the other name adds a second, unused and billed volume
and leaves the root at the image's size, where the copies, checkpoints and pip installs land.
"""
from __future__ import annotations

from trainctl.aws import clients as aws
from trainctl.errors import UsageError


def root_device(ec2, ami: str, notes: list[str]) -> str:
    """The image's RootDeviceName; a one-line refusal when the image cannot be read (no such AMI here, or not
    shared with this account) or has none (an instance-store image: trainctl maps an EBS root)."""
    try:
        images = ec2.describe_images(ImageIds=[ami])["Images"]
    except Exception as e:  # noqa: BLE001 - InvalidAMIID.NotFound / .Malformed / access: one line
        raise UsageError(f"cannot read AMI {ami} in {ec2.meta.region_name} ({aws.error_summary(e)}); pass an AMI "
                         "this account can launch there (--ami) or leave --ami out for the Deep Learning AMI") from e
    if not images or images[0].get("RootDeviceType") != "ebs" or not images[0].get("RootDeviceName"):
        raise UsageError(f"AMI {ami} in {ec2.meta.region_name} has no EBS root device (DescribeImages); trainctl "
                         "sizes the nodes' root volume on EBS: pass an EBS-backed AMI (--ami)")
    device = images[0]["RootDeviceName"]
    notes.append(f"root volume on {device} (the AMI's RootDeviceName)")
    return device
