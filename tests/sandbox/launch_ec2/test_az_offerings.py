"""Instance-type offerings per AZ as AWS publishes them (trainctl_sandbox/server/az_offerings.py): moto's data has no
P3, so the sandbox offered p3 nowhere and took a p3 launch into any AZ unchecked. Now DescribeInstanceTypeOfferings
lists p3 where AWS offers it (us-east-1: every AZ; us-west-2: every AZ) and a launch into an AZ that does not offer
the type is refused as EC2 refuses it: HTTP 400 `Unsupported`, "Your requested instance type (p3.2xlarge) is not
supported in your requested Availability Zone (eu-central-1c). Please retry your request by not specifying an
Availability Zone or choosing eu-central-1a, eu-central-1b." (EC2's answer as users quote it:
dspace-group/dspace-reference-architecture-aws#100, fedora-copr/copr#2840; AWS Knowledge Center,
"ec2-instance-type-not-supported-az-error"). Over HTTP, with boto3.

Note: an EC2 p3 plan or launch through the CLI stops before any offering is read, on the image rule (no image
trainctl chooses drives Volta: catalog/images.py VOLTA_NOTE), on this code as on the code before."""
from __future__ import annotations

import pytest
from botocore.exceptions import ClientError


def _zones(sb, region: str, itype: str) -> set[str]:
    ec2 = sb.client("ec2", region)
    return {o["Location"] for o in ec2.describe_instance_type_offerings(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": [itype]}])[
        "InstanceTypeOfferings"]}


def test_p3_is_offered_per_az_as_aws_publishes_it(sandbox):
    assert _zones(sandbox, "us-east-1", "p3.2xlarge") == {f"us-east-1{z}" for z in "abcdef"}
    assert _zones(sandbox, "us-west-2", "p3.16xlarge") == {f"us-west-2{z}" for z in "abcd"}
    ids = {o["Location"] for o in sandbox.client("ec2", "eu-west-1").describe_instance_type_offerings(
        LocationType="availability-zone-id", Filters=[{"Name": "instance-type", "Values": ["p3.8xlarge"]}])[
        "InstanceTypeOfferings"]}
    assert ids == {"euw1-az2", "euw1-az3"}


def test_a_launch_into_an_az_that_does_not_offer_the_type_is_refused_as_ec2_refuses_it(sandbox):
    ec2 = sandbox.client("ec2", "eu-west-1")
    zone_of = {z["ZoneId"]: z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    image = ec2.register_image(Name="own-image", RootDeviceName="/dev/xvda", Architecture="x86_64",
                               VirtualizationType="hvm", BlockDeviceMappings=[
                                   {"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 8}}])["ImageId"]
    with pytest.raises(ClientError) as refused:
        ec2.run_instances(ImageId=image, InstanceType="p3.2xlarge", MinCount=1, MaxCount=1,
                          Placement={"AvailabilityZone": zone_of["euw1-az1"]})
    error = refused.value.response["Error"]
    assert error["Code"] == "Unsupported", error
    assert f"not supported in your requested Availability Zone ({zone_of['euw1-az1']})" in error["Message"]
    assert zone_of["euw1-az2"] in error["Message"] and zone_of["euw1-az3"] in error["Message"], error
    launched = ec2.run_instances(ImageId=image, InstanceType="p3.2xlarge", MinCount=1, MaxCount=1,
                                 Placement={"AvailabilityZone": zone_of["euw1-az2"]})["Instances"]
    ec2.terminate_instances(InstanceIds=[i["InstanceId"] for i in launched])
