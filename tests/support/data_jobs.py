"""A job's own data in the sandbox: the user's project that reads its channels (tests/support/data_script), a dataset
of numbered shards in S3 that job roles may read, the CLI against the sandbox, and a security group that lets
Lustre in. The data tests of tests/sandbox/data/ and the data jobs of tests/slow/ share them."""
from __future__ import annotations

import shutil
from pathlib import Path

from tests.support.helpers import run_cli
from trainctl_sandbox.testing import admit_data_buckets

SCRIPT = Path(__file__).resolve().parent / "data_script"  # a user's project whose script reads its channels
FILES = 24


def project(tmp_path: Path, data: str) -> str:
    """A copy of the data script's project whose spec has `data: DATA`; the spec's path."""
    folder = tmp_path / "project"
    shutil.copytree(SCRIPT, folder)
    spec = folder / "job.yaml"
    spec.write_text(spec.read_text().replace("data: {train: s3://my-datasets/shards/}", f"data: {data}"))
    return str(spec)


def dataset(sb, bucket: str = "my-datasets", region: str = "us-east-1", files: int = FILES) -> None:
    s3 = sb.client("s3", region)
    s3.create_bucket(Bucket=bucket, **({} if region == "us-east-1" else
                                       {"CreateBucketConfiguration": {"LocationConstraint": region}}))
    for i in range(files):
        s3.put_object(Bucket=bucket, Key=f"shards/part-{i:03d}.txt", Body=str(i).encode())
    admit_data_buckets(sb, bucket)  # an administrator lets job roles read it


def cli(sb, home, *args, timeout=150):
    return run_cli(list(args), home, env=sb.env, timeout=timeout)


def lustre_group(sb) -> str:
    """A group for a file system in the default VPC that lets Lustre in (TCP 988 and 1018-1023) from its own
    servers and from the VPC's addresses, as the FSx for Lustre User Guide asks."""
    ec2 = sb.client("ec2")
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]
    group = ec2.create_security_group(GroupName="lustre", Description="FSx for Lustre",
                                      VpcId=vpc["VpcId"])["GroupId"]
    ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": lo, "ToPort": hi, "UserIdGroupPairs": [{"GroupId": group}],
         "IpRanges": [{"CidrIp": vpc["CidrBlock"]}]} for lo, hi in ((988, 988), (1018, 1023))])
    return group


def default_subnets(sb) -> dict[str, str]:
    return {s["AvailabilityZone"]: s["SubnetId"] for s in sb.client("ec2").describe_subnets(
        Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"]}


def lustre_file_system(sb, subnet: str, groups: list[str] | None = None, files: int = 12) -> dict:
    """A Lustre file system linked to a bucket whose objects sit under shards/; in the VPC's default group unless
    `groups` says otherwise."""
    s3 = sb.client("s3")
    s3.create_bucket(Bucket="lustre-data")
    for i in range(files):
        s3.put_object(Bucket="lustre-data", Key=f"shards/part-{i:03d}.txt", Body=str(i).encode())
    s3.put_object(Bucket="lustre-data", Key="elsewhere/not-mine.txt", Body=b"x")
    return sb.client("fsx").create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet], **({"SecurityGroupIds": groups} if groups
                                                                               else {}),
        LustreConfiguration={"DeploymentType": "SCRATCH_2", "ImportPath": "s3://lustre-data"})["FileSystem"]
