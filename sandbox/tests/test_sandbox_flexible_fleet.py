"""An instant CreateFleet over several instance types of one accelerator, as EC2 fills it: one override per
type, a capacity switch per type, capacity-optimized-prioritized (capacity first, then the priorities),
SingleInstanceType, MinTargetCapacity (all or nothing) and MaxTotalPrice; and placement scores that grow
with the set of types asked. Through boto3 against the strict sandbox."""
from __future__ import annotations

from trainctl_sandbox.server import seed

TAG = {"Key": "trainctl:job", "Value": "job-flex"}
ONE_A10G = ("g5.xlarge", "g5.2xlarge", "g5.4xlarge")
AZ = "us-east-1b"


def _subnet(ec2, az: str = AZ) -> str:
    return next(s["SubnetId"] for s in ec2.describe_subnets(
        Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"] if s["AvailabilityZone"] == az)


def _fleet(ec2, types, total: int, **spot) -> dict:
    template = ec2.create_launch_template(LaunchTemplateName=f"lt-{len(ec2.describe_launch_templates()['LaunchTemplates'])}",
                                          LaunchTemplateData={
        "ImageId": f"resolve:ssm:{seed.GPU_PYTORCH_PARAMETER}", "InstanceType": types[0],
        "TagSpecifications": [{"ResourceType": "instance", "Tags": [TAG]}]})["LaunchTemplate"]["LaunchTemplateId"]
    subnet = _subnet(ec2)
    return ec2.create_fleet(Type="instant", LaunchTemplateConfigs=[{
        "LaunchTemplateSpecification": {"LaunchTemplateId": template, "Version": "$Latest"},
        "Overrides": [{"InstanceType": t, "SubnetId": subnet, "Priority": i} for i, t in enumerate(types)]}],
        TargetCapacitySpecification={"TotalTargetCapacity": total, "DefaultTargetCapacityType": "spot"},
        SpotOptions={"AllocationStrategy": "capacity-optimized-prioritized", "SingleAvailabilityZone": True,
                     "InstanceInterruptionBehavior": "terminate", **spot})


def _types(fleet: dict) -> list[tuple[str, int]]:
    return [(g["InstanceType"], len(g["InstanceIds"])) for g in fleet["Instances"]]


def test_a_type_without_capacity_leaves_the_fleet_to_the_next_priority(sandbox):
    ec2 = sandbox.client("ec2")
    sandbox.admin.set_capacity("g5.xlarge", AZ, available=False)
    fleet = _fleet(ec2, ONE_A10G, 4, MinTargetCapacity=4)
    assert _types(fleet) == [("g5.2xlarge", 4)]
    # the type turned off is not tried first: capacity comes before the priorities
    assert fleet["Errors"] == []


def test_priorities_decide_among_types_that_have_room(sandbox):
    fleet = _fleet(sandbox.client("ec2"), ("g5.4xlarge", "g5.xlarge", "g5.2xlarge"), 3, MinTargetCapacity=3)
    assert _types(fleet) == [("g5.4xlarge", 3)]


def test_a_mix_of_types_fills_the_target_only_without_single_instance_type(sandbox):
    ec2 = sandbox.client("ec2")

    def limit():
        for t, n in zip(ONE_A10G, (2, 2, 0)):
            sandbox.admin.set_capacity(t, AZ, available=n)

    limit()
    mixed = _fleet(ec2, ONE_A10G, 4, MinTargetCapacity=4)
    assert sorted(_types(mixed)) == [("g5.2xlarge", 2), ("g5.xlarge", 2)]
    limit()
    single = _fleet(ec2, ONE_A10G, 4, MinTargetCapacity=4, SingleInstanceType=True)
    assert single["Instances"] == []
    sandbox.admin.set_capacity("g5.4xlarge", AZ, available=True)
    whole = _fleet(ec2, ONE_A10G, 4, MinTargetCapacity=4, SingleInstanceType=True)
    assert _types(whole) == [("g5.4xlarge", 4)]


def test_min_target_capacity_is_all_or_nothing_across_types(sandbox):
    ec2 = sandbox.client("ec2")
    for t in ONE_A10G:
        sandbox.admin.set_capacity(t, AZ, available=1)
    fleet = _fleet(ec2, ONE_A10G, 4, MinTargetCapacity=4, SingleInstanceType=True)
    assert fleet["Instances"] == []
    assert {e["ErrorCode"] for e in fleet["Errors"]} == {"InsufficientInstanceCapacity"}
    assert not [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]


def test_max_total_price_stops_the_launches(sandbox):
    ec2 = sandbox.client("ec2")
    capped = _fleet(ec2, ("g5.2xlarge",), 4, MaxTotalPrice="0.01")
    assert capped["Instances"] == []
    some = _fleet(ec2, ("g5.2xlarge",), 4, MaxTotalPrice="1.2")   # a g5.2xlarge Spot is about $0.5 an hour
    assert 1 <= sum(n for _, n in _types(some)) < 4
    nothing = _fleet(ec2, ("g5.2xlarge",), 4, MaxTotalPrice="1.2", MinTargetCapacity=4)
    assert nothing["Instances"] == []


def _score(ec2, types, count: int = 4) -> int:
    scores = ec2.get_spot_placement_scores(InstanceTypes=list(types), TargetCapacity=count,
                                           SingleAvailabilityZone=True, RegionNames=["us-east-1"])
    return next(s["Score"] for s in scores["SpotPlacementScores"] if s["AvailabilityZoneId"] == "use1-az1")


def test_placement_scores_grow_with_the_set_of_types_and_repeat(sandbox):
    ec2 = sandbox.client("ec2")
    one, three = _score(ec2, ("g5.2xlarge",)), _score(ec2, ONE_A10G)
    five = _score(ec2, (*ONE_A10G, "g5.8xlarge", "g5.16xlarge"))
    assert one <= 3 and one <= three <= five
    assert _score(ec2, ONE_A10G) == three
    assert _score(ec2, ONE_A10G, 400) < three       # a bigger target scores lower
    for t in ONE_A10G:                               # the capacity switches reach the scores
        sandbox.admin.set_capacity(t, available=False)
    assert _score(ec2, ONE_A10G) == 1
