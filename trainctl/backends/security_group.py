"""The security group both backends make for a job: its inbound rule admits all traffic from itself only, and an
outbound rule lets all traffic out to itself (EFA needs both directions), so the job's hosts reach each other
(NCCL, EFA, rendezvous) and nothing else reaches them."""
from __future__ import annotations

from trainctl.backends.base import JOB_TAG, AwsCall


def self_only_security_group(job_id: str, name: str, vpc_id: str, region: str, job_tags: list[dict],
                             members: str = "nodes", existing_group: str | None = None) -> list[AwsCall]:
    """The calls that make the group. A new group's id travels to later calls as ${security_group_id}; a
    re-run whose group already exists finds it by the job's tag (the fallback read); for a group found by
    prepare only the rule is ensured."""
    group = existing_group or "${security_group_id}"
    find = AwsCall("ec2", "DescribeSecurityGroups", {"Filters": [
        {"Name": f"tag:{JOB_TAG}", "Values": [job_id]}, {"Name": "vpc-id", "Values": [vpc_id]}]},
        region, outputs={"security_group_id": "SecurityGroups.0.GroupId"}, why="the job's group from a run before")
    calls = [] if existing_group else [
        AwsCall("ec2", "CreateSecurityGroup", {
            "GroupName": name, "VpcId": vpc_id,
            "Description": f"trainctl job {job_id}: {members} talk to each other only",
            "TagSpecifications": [{"ResourceType": "security-group", "Tags": job_tags}]},
            region, outputs={"security_group_id": "GroupId"}, ok_errors=("InvalidGroup.Duplicate",),
            fallback=find, why=f"a group for the job's {members}")]
    calls.append(AwsCall("ec2", "AuthorizeSecurityGroupIngress", {
        "GroupId": group, "IpPermissions": [{"IpProtocol": "-1", "UserIdGroupPairs": [
            {"GroupId": group, "Description": f"all traffic from the job's own {members}"}]}],
        "TagSpecifications": [{"ResourceType": "security-group-rule", "Tags": job_tags}]},
        region, ok_errors=("InvalidPermission.Duplicate",),
        why=f"all traffic between the job's {members}, none from anywhere else"))
    # EFA's OS-bypass traffic needs an outbound rule to the group itself as well (EC2 User Guide, EFA security
    # group step; SageMaker Developer Guide, VPC with EFA): the default egress to 0.0.0.0/0 is not enough.
    calls.append(AwsCall("ec2", "AuthorizeSecurityGroupEgress", {
        "GroupId": group, "IpPermissions": [{"IpProtocol": "-1", "UserIdGroupPairs": [
            {"GroupId": group, "Description": f"all traffic to the job's own {members}"}]}],
        "TagSpecifications": [{"ResourceType": "security-group-rule", "Tags": job_tags}]},
        region, ok_errors=("InvalidPermission.Duplicate",), why=f"all traffic out to the job's {members} (EFA)"))
    return calls
