"""What a fresh sandbox holds: default VPCs, job buckets, the SageMaker role, Deep Learning AMIs."""
from __future__ import annotations

import json
from urllib.parse import unquote

import pytest

from trainctl_sandbox.server import seed

REGIONS = ("us-east-1", "us-west-2")


@pytest.mark.parametrize("region", REGIONS)
def test_default_vpc_has_a_default_subnet_in_every_az(sandbox, region):
    ec2 = sandbox.client("ec2", region)
    vpcs = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"]
    assert len(vpcs) == 1
    zones = {z["ZoneName"] for z in ec2.describe_availability_zones(
        Filters=[{"Name": "zone-type", "Values": ["availability-zone"]}])["AvailabilityZones"]}
    subnets = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpcs[0]["VpcId"]]},
                                            {"Name": "default-for-az", "Values": ["true"]}])["Subnets"]
    assert sorted(s["AvailabilityZone"] for s in subnets) == sorted(zones)
    assert len(zones) >= 3


@pytest.mark.parametrize("region", REGIONS)
def test_job_bucket_exists_in_its_region(sandbox, region):
    s3 = sandbox.client("s3", region)
    name = f"trainctl-123456789012-{region}"
    s3.head_bucket(Bucket=name)
    location = s3.get_bucket_location(Bucket=name)["LocationConstraint"]
    assert (location or "us-east-1") == region


def test_sagemaker_execution_role_trusts_sagemaker(sandbox):
    role = sandbox.client("iam").get_role(RoleName="trainctl-sagemaker-execution")["Role"]
    doc = role["AssumeRolePolicyDocument"]
    doc = json.loads(unquote(doc)) if isinstance(doc, str) else doc
    principals = [s["Principal"]["Service"] for s in doc["Statement"] if s["Effect"] == "Allow"]
    assert principals == ["sagemaker.amazonaws.com"]
    assert role["Arn"] == "arn:aws:iam::123456789012:role/trainctl-sagemaker-execution"


@pytest.mark.parametrize("region", REGIONS)
def test_dlami_parameters_resolve_to_amazon_images_that_launch(sandbox, region):
    ssm = sandbox.client("ssm", region)
    ec2 = sandbox.client("ec2", region)
    for parameter, instance_type in ((seed.GPU_PYTORCH_PARAMETER, "g5.12xlarge"),
                                     (seed.NEURON_PARAMETER, "trn1.32xlarge")):
        value = ssm.get_parameter(Name=parameter)["Parameter"]
        assert value["DataType"] == "aws:ec2:image"
        image = ec2.describe_images(ImageIds=[value["Value"]])["Images"][0]
        assert image["OwnerId"] == seed.DLAMI_OWNER and image["Architecture"] == "x86_64"
        assert "Deep Learning" in image["Name"]
        subnet = _subnet_offering(ec2, region, instance_type)
        r = ec2.run_instances(ImageId=value["Value"], InstanceType=instance_type, MinCount=1, MaxCount=1,
                              SubnetId=subnet)
        assert r["Instances"][0]["ImageId"] == value["Value"]


def test_dlami_parameters_are_listed_under_the_public_paths(sandbox):
    ssm = sandbox.client("ssm")
    names = {p["Name"] for page in ssm.get_paginator("get_parameters_by_path").paginate(
        Path="/aws/service/deeplearning/ami/x86_64", Recursive=True) for p in page["Parameters"]}
    assert seed.GPU_PYTORCH_PARAMETER in names
    neuron = ssm.get_parameters_by_path(Path="/aws/service/neuron/dlami", Recursive=True)["Parameters"]
    assert seed.NEURON_PARAMETER in {p["Name"] for p in neuron}


def _subnet_offering(ec2, region: str, instance_type: str) -> str:
    """A default subnet in an AZ that offers the type (not every AZ has Trainium)."""
    offered = {o["Location"] for o in ec2.describe_instance_type_offerings(
        LocationType="availability-zone-id",
        Filters=[{"Name": "instance-type", "Values": [instance_type]}])["InstanceTypeOfferings"]}
    for s in ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"]:
        if s["AvailabilityZoneId"] in offered:
            return s["SubnetId"]
    raise AssertionError(f"no AZ of {region} offers {instance_type}")


def test_reset_brings_back_a_clean_seeded_account(sandbox):
    ec2 = sandbox.client("ec2")
    s3 = sandbox.client("s3")
    ec2.run_instances(ImageId=seed.ami_id("us-east-1", "gpu-base"), InstanceType="g5.xlarge", MinCount=1, MaxCount=1)
    s3.delete_bucket(Bucket="trainctl-123456789012-us-east-1")
    sandbox.admin.reset()
    assert ec2.describe_instances()["Reservations"] == []
    s3.head_bucket(Bucket="trainctl-123456789012-us-east-1")
