"""The nodes' root volume is mapped under the AMI's own RootDeviceName (DescribeImages), not a fixed /dev/sda1:
Amazon Linux images boot from /dev/xvda, and a mapping under /dev/sda1 gave every node a second, unused, billed
200 GiB volume while the root stayed at the image's size. The sandbox's AMIs carry their real root device and its
instances get the image's root beside a mapping that misses it, as EC2's do (trainctl_sandbox/ec2/root_volumes.py).
Through the CLI."""
from __future__ import annotations

import json

from tests.support.helpers import CONFIGS, run_cli


def test_each_node_has_one_root_volume_on_the_ami_s_root_device(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    proc = run_cli(["--output", "json", "--region", "us-east-1", "launch", str(CONFIGS / "vit-base-g5.yaml"),
                    "--platform", "ec2", "--layout", "g5.xlarge:1:on-demand", "--yes"], home, env=sb.env)
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)["job_id"]
    ec2 = sb.client("ec2", "us-east-1")
    (node,) = [i for r in ec2.describe_instances(Filters=[{"Name": "tag:trainctl:job", "Values": [job]}])[
        "Reservations"] for i in r["Instances"]]
    root = ec2.describe_images(ImageIds=[node["ImageId"]])["Images"][0]["RootDeviceName"]
    assert root == "/dev/xvda"   # the PyTorch 2.10 DLAMI is Amazon Linux 2023
    volumes = ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [node["InstanceId"]]}])[
        "Volumes"]
    assert [(v["Attachments"][0]["Device"], v["Size"]) for v in volumes] == [(root, 200)], volumes
    assert f"root volume on {root}" in proc.stderr
    assert run_cli(["down", job], home, env=sb.env).returncode == 0
