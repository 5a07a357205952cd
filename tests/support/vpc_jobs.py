"""SageMaker jobs made straight against the sandbox's API in the default VPC (no trainctl): a security group with
or without egress to itself, the first default subnet, and the wait for a job's end. The network rules and the
secrets' reachability both check what the sandbox does to such jobs."""
from __future__ import annotations

import time

from trainctl_sandbox.testing import default_vpc

TRAIN = "print('trainctl step=1 loss=1.0 samples_per_s=10.0')\n"  # a job's whole script


def wait_ended(sb, job: str) -> dict:
    sm = sb.client("sagemaker")
    while True:  # pytest-timeout bounds the wait
        d = sm.describe_training_job(TrainingJobName=job)
        if d["TrainingJobStatus"] in ("Completed", "Failed", "Stopped"):
            return d
        time.sleep(0.2)


def job_group(sb, egress_to_itself: bool) -> str:
    ec2 = sb.client("ec2")
    vpc, _ = default_vpc(sb)
    gid = ec2.create_security_group(GroupName=f"g-{egress_to_itself}", Description="x", VpcId=vpc)["GroupId"]
    pair = [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": gid}]}]
    ec2.authorize_security_group_ingress(GroupId=gid, IpPermissions=pair)
    if egress_to_itself:
        ec2.authorize_security_group_egress(GroupId=gid, IpPermissions=pair)
    return gid


def first_subnet(sb) -> str:
    vpc, _ = default_vpc(sb)
    subnets = sb.client("ec2").describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]
    return sorted(s["SubnetId"] for s in subnets if s["DefaultForAz"])[0]  # not add_nat's public subnet

