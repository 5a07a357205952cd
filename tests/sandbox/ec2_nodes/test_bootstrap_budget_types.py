"""The node agent's budget counts each of the job's instances at its own type's price, read from EC2's own
DescribeInstances answers in the sandbox (issue 36, item 11, the agent's part): a flexible layout's fleet that got
one node of a dearer type is counted at that type's price, the plan's type at its own."""
from __future__ import annotations

from trainctl.bootstrap.budget import spent_usd


def test_the_agents_budget_counts_each_instance_at_its_own_types_price(sandbox):
    from trainctl_sandbox.server.seed import ami_id

    ec2 = sandbox.client("ec2")
    for itype in ("g5.xlarge", "g5.4xlarge"):
        ec2.run_instances(ImageId=ami_id("us-east-1", "gpu-pytorch-2.7"), InstanceType=itype, MinCount=1, MaxCount=1,
                          MetadataOptions={"HttpTokens": "required"}, TagSpecifications=[{
                              "ResourceType": "instance", "Tags": [{"Key": "trainctl:job", "Value": "flex-job"}]}])
    found = [i for r in ec2.describe_instances(Filters=[{"Name": "tag:trainctl:job", "Values": ["flex-job"]}])[
        "Reservations"] for i in r["Instances"]]
    an_hour_on = max(i["LaunchTime"].timestamp() for i in found) + 3600
    # the config as the launch writes it for a flexible layout (backends/budget.py: node_config)
    cfg = {"budget_usd": 5.0, "node_hourly_usd": 1.624, "node_hourly_by_type": {"g5.xlarge": 0.589,
                                                                                "g5.4xlarge": 1.624}}
    spent, hourly, running = spent_usd(ec2, "flex-job", cfg, an_hour_on)
    assert running == 2 and round(hourly, 6) == 0.589 + 1.624
    assert 0.589 + 1.624 <= spent < (0.589 + 1.624) * 1.01  # an hour each (plus the seconds between the two starts)
    ec2.terminate_instances(InstanceIds=[i["InstanceId"] for i in found])
