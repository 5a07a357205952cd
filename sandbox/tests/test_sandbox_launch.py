"""Placement groups, RunInstances and instant CreateFleet as EC2 does them, through boto3."""
from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from trainctl_sandbox.server import seed

AMI = seed.ami_id("us-east-1", "gpu-pytorch-2.7")
TAG = {"Key": "trainctl:job", "Value": "job-1"}


def _code(excinfo) -> str:
    return excinfo.value.response["Error"]["Code"]


def _subnets(ec2) -> dict[str, str]:
    return {s["AvailabilityZone"]: s["SubnetId"] for s in ec2.describe_subnets(
        Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"]}


def _instances(ec2, **kw) -> list[dict]:
    return [i for r in ec2.describe_instances(**kw)["Reservations"] for i in r["Instances"]]


# ----------------------------------------------------------------------------- placement groups
def test_placement_group_lifecycle_with_tags_and_filters(sandbox):
    ec2 = sandbox.client("ec2")
    created = ec2.create_placement_group(GroupName="pg-a", Strategy="cluster", TagSpecifications=[
        {"ResourceType": "placement-group", "Tags": [TAG]}])["PlacementGroup"]
    assert created["GroupId"].startswith("pg-") and created["State"] == "available"
    ec2.create_placement_group(GroupName="pg-b", Strategy="partition", PartitionCount=3)
    ec2.create_placement_group(GroupName="pg-c", Strategy="spread")
    everything = ec2.describe_placement_groups()["PlacementGroups"]
    assert [g["GroupName"] for g in everything] == ["pg-a", "pg-b", "pg-c"]
    assert everything[1]["PartitionCount"] == 3 and everything[2]["SpreadLevel"] == "rack"
    by_tag = ec2.describe_placement_groups(Filters=[{"Name": "tag:trainctl:job", "Values": ["job-1"]}])
    assert [g["GroupName"] for g in by_tag["PlacementGroups"]] == ["pg-a"]
    assert by_tag["PlacementGroups"][0]["Tags"] == [TAG]
    by_name = ec2.describe_placement_groups(Filters=[{"Name": "group-name", "Values": ["pg-b"]}])
    assert [g["Strategy"] for g in by_name["PlacementGroups"]] == ["partition"]
    ec2.delete_placement_group(GroupName="pg-a")
    with pytest.raises(ClientError) as e:
        ec2.describe_placement_groups(GroupNames=["pg-a"])
    assert _code(e) == "InvalidPlacementGroup.Unknown"


def test_placement_group_validation(sandbox):
    ec2 = sandbox.client("ec2")
    with pytest.raises(ClientError) as e:
        ec2.create_placement_group(GroupName="x", Strategy="clustered")
    assert _code(e) == "InvalidParameterValue"
    with pytest.raises(ClientError) as e:
        ec2.create_placement_group(GroupName="x", Strategy="cluster", PartitionCount=2)
    assert _code(e) == "InvalidParameterCombination"
    ec2.create_placement_group(GroupName="x", Strategy="cluster")
    with pytest.raises(ClientError) as e:
        ec2.create_placement_group(GroupName="x", Strategy="cluster")
    assert _code(e) == "InvalidPlacementGroup.Duplicate"
    with pytest.raises(ClientError) as e:
        ec2.delete_placement_group(GroupName="nope")
    assert _code(e) == "InvalidPlacementGroup.Unknown"


def test_run_instances_records_the_placement_group_and_it_cannot_be_deleted_in_use(sandbox):
    ec2 = sandbox.client("ec2")
    ec2.create_placement_group(GroupName="ring", Strategy="cluster")
    r = ec2.run_instances(ImageId=AMI, InstanceType="g5.12xlarge", MinCount=2, MaxCount=2,
                          SubnetId=_subnets(ec2)["us-east-1a"], Placement={"GroupName": "ring"})
    ids = [i["InstanceId"] for i in r["Instances"]]
    described = _instances(ec2, InstanceIds=ids)
    assert [i["Placement"]["GroupName"] for i in described] == ["ring", "ring"]
    with pytest.raises(ClientError) as e:
        ec2.delete_placement_group(GroupName="ring")
    assert _code(e) == "InvalidPlacementGroup.InUse"
    ec2.terminate_instances(InstanceIds=ids)
    ec2.delete_placement_group(GroupName="ring")
    with pytest.raises(ClientError) as e:
        ec2.run_instances(ImageId=AMI, InstanceType="g5.12xlarge", MinCount=1, MaxCount=1,
                          Placement={"GroupName": "ring"})
    assert _code(e) == "InvalidPlacementGroup.Unknown"


# ----------------------------------------------------------------------------- RunInstances
def test_run_instances_client_token_is_idempotent(sandbox):
    ec2 = sandbox.client("ec2")
    kw = dict(ImageId=AMI, InstanceType="g5.xlarge", MinCount=2, MaxCount=2, ClientToken="launch-1")
    first = ec2.run_instances(**kw)
    again = ec2.run_instances(**kw)
    assert again["ReservationId"] == first["ReservationId"]
    assert [i["InstanceId"] for i in again["Instances"]] == [i["InstanceId"] for i in first["Instances"]]
    assert len(_instances(ec2)) == 2
    with pytest.raises(ClientError) as e:
        ec2.run_instances(**{**kw, "InstanceType": "g5.2xlarge"})
    assert _code(e) == "IdempotentParameterMismatch"
    assert len(_instances(ec2)) == 2


def test_run_instances_without_capacity_fails_with_insufficient_instance_capacity(sandbox):
    ec2 = sandbox.client("ec2", retries={"total_max_attempts": 1, "mode": "standard"})
    subnets = _subnets(ec2)
    sandbox.admin.set_capacity("g5.12xlarge", "us-east-1a", available=False)
    with pytest.raises(ClientError) as e:
        ec2.run_instances(ImageId=AMI, InstanceType="g5.12xlarge", MinCount=1, MaxCount=1,
                          SubnetId=subnets["us-east-1a"])
    assert _code(e) == "InsufficientInstanceCapacity"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500  # a server error on AWS too
    ec2.run_instances(ImageId=AMI, InstanceType="g5.12xlarge", MinCount=1, MaxCount=1, SubnetId=subnets["us-east-1b"])
    sandbox.admin.set_capacity("g5.12xlarge", None, available=False)  # every AZ
    with pytest.raises(ClientError):
        ec2.run_instances(ImageId=AMI, InstanceType="g5.12xlarge", MinCount=1, MaxCount=1,
                          SubnetId=subnets["us-east-1b"])


def test_limited_capacity_launches_between_min_and_max_count(sandbox):
    ec2 = sandbox.client("ec2", retries={"total_max_attempts": 1, "mode": "standard"})
    subnet = _subnets(ec2)["us-east-1b"]
    sandbox.admin.set_capacity("p4d.24xlarge", "us-east-1b", available=3)
    r = ec2.run_instances(ImageId=AMI, InstanceType="p4d.24xlarge", MinCount=1, MaxCount=2, SubnetId=subnet)
    assert len(r["Instances"]) == 2
    with pytest.raises(ClientError) as e:
        ec2.run_instances(ImageId=AMI, InstanceType="p4d.24xlarge", MinCount=2, MaxCount=4, SubnetId=subnet)
    assert _code(e) == "InsufficientInstanceCapacity"
    assert len(ec2.run_instances(ImageId=AMI, InstanceType="p4d.24xlarge", MinCount=1, MaxCount=4,
                                 SubnetId=subnet)["Instances"]) == 1


def test_an_az_that_does_not_offer_the_type_says_unsupported(sandbox):
    ec2 = sandbox.client("ec2")
    offered = {o["Location"] for o in ec2.describe_instance_type_offerings(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": ["trn1.32xlarge"]}],
    )["InstanceTypeOfferings"]}
    zones = {z["ZoneName"]: z["ZoneId"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    offered_ids = {o["Location"] for o in ec2.describe_instance_type_offerings(
        LocationType="availability-zone-id", Filters=[{"Name": "instance-type", "Values": ["trn1.32xlarge"]}],
    )["InstanceTypeOfferings"]}
    missing = sorted(name for name, zid in zones.items() if zid not in offered_ids)
    assert missing and offered
    with pytest.raises(ClientError) as e:
        ec2.run_instances(ImageId=seed.ami_id("us-east-1", "neuron"), InstanceType="trn1.32xlarge", MinCount=1,
                          MaxCount=1, SubnetId=_subnets(ec2)[missing[0]])
    assert _code(e) == "Unsupported"


def test_run_instances_resolves_ssm_image_ids(sandbox):
    ec2 = sandbox.client("ec2")
    r = ec2.run_instances(ImageId=f"resolve:ssm:{seed.GPU_PYTORCH_PARAMETER}", InstanceType="g5.xlarge",
                          MinCount=1, MaxCount=1)
    assert r["Instances"][0]["ImageId"] == AMI


# ----------------------------------------------------------------------------- CreateFleet (instant)
def _template(ec2, name: str = "lt", **data) -> str:
    base = {"ImageId": f"resolve:ssm:{seed.GPU_PYTORCH_PARAMETER}", "InstanceType": "g5.12xlarge",
            "TagSpecifications": [{"ResourceType": "instance", "Tags": [TAG]}]}
    return ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={**base, **data})[
        "LaunchTemplate"]["LaunchTemplateId"]


def _fleet(ec2, template_id: str, overrides: list[dict], total: int, market: str = "spot", **kw) -> dict:
    return ec2.create_fleet(Type="instant", LaunchTemplateConfigs=[{
        "LaunchTemplateSpecification": {"LaunchTemplateId": template_id, "Version": "$Latest"},
        "Overrides": overrides}], TargetCapacitySpecification={"TotalTargetCapacity": total,
                                                              "DefaultTargetCapacityType": market}, **kw)


def _launched(fleet: dict) -> list[str]:
    return [i for group in fleet.get("Instances", []) for i in group["InstanceIds"]]


def test_fleet_moves_to_the_next_pool_when_one_has_no_capacity(sandbox):
    ec2 = sandbox.client("ec2")
    subnets = _subnets(ec2)
    lt = _template(ec2)
    sandbox.admin.set_capacity("g5.12xlarge", "us-east-1a", available=False)
    fleet = _fleet(ec2, lt, [{"SubnetId": subnets["us-east-1a"], "Priority": 1},
                             {"SubnetId": subnets["us-east-1b"], "Priority": 2}], 2, market="on-demand",
                   OnDemandOptions={"AllocationStrategy": "prioritized"})
    assert [(e["ErrorCode"], e["LaunchTemplateAndOverrides"]["Overrides"]["SubnetId"]) for e in fleet["Errors"]] == [
        ("InsufficientInstanceCapacity", subnets["us-east-1a"])]
    assert [(g["AvailabilityZone"], len(g["InstanceIds"]), g["Lifecycle"]) for g in fleet["Instances"]] == [
        ("us-east-1b", 2, "on-demand")]


def test_partial_fleet_when_every_pool_runs_out(sandbox):
    ec2 = sandbox.client("ec2")
    subnets = _subnets(ec2)
    lt = _template(ec2)
    sandbox.admin.set_capacity("g5.12xlarge", "us-east-1b", available=1)
    sandbox.admin.set_capacity("g5.12xlarge", "us-east-1c", available=1)
    fleet = _fleet(ec2, lt, [{"SubnetId": subnets["us-east-1b"]}, {"SubnetId": subnets["us-east-1c"]}], 4)
    assert len(_launched(fleet)) == 2
    assert {e["ErrorCode"] for e in fleet["Errors"]} == {"InsufficientInstanceCapacity"}
    assert len(fleet["Errors"]) == 2
    described = ec2.describe_fleets(FleetIds=[fleet["FleetId"]])["Fleets"][0]
    assert described["FulfilledCapacity"] == 2 and described["TargetCapacitySpecification"]["TotalTargetCapacity"] == 4


def test_min_target_capacity_not_met_launches_nothing(sandbox):
    ec2 = sandbox.client("ec2")
    subnets = _subnets(ec2)
    lt = _template(ec2)
    sandbox.admin.set_capacity("g5.12xlarge", "us-east-1b", available=2)
    fleet = _fleet(ec2, lt, [{"SubnetId": subnets["us-east-1b"]}], 4,
                   SpotOptions={"MinTargetCapacity": 4, "SingleAvailabilityZone": True})
    assert _launched(fleet) == [] and fleet["Errors"]
    assert _instances(ec2) == []


def test_fleet_spreads_over_types_by_price_and_tags_and_places_instances(sandbox):
    ec2 = sandbox.client("ec2")
    subnets = _subnets(ec2)
    ec2.create_placement_group(GroupName="ring", Strategy="cluster")
    lt = _template(ec2, Placement={"GroupName": "ring"})
    overrides = [{"InstanceType": t, "SubnetId": subnets["us-east-1b"]} for t in ("g5.48xlarge", "g5.12xlarge")]
    fleet = _fleet(ec2, lt, overrides, 3, market="on-demand",
                   TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "fleet-tag", "Value": "1"}]}])
    assert fleet["Errors"] == []
    assert [(g["InstanceType"], len(g["InstanceIds"])) for g in fleet["Instances"]] == [("g5.12xlarge", 3)]
    described = _instances(ec2, Filters=[{"Name": "tag:trainctl:job", "Values": ["job-1"]}])
    assert sorted(i["InstanceId"] for i in described) == sorted(_launched(fleet))
    for i in described:
        tags = {t["Key"]: t["Value"] for t in i["Tags"]}
        assert tags["fleet-tag"] == "1" and tags["aws:ec2:fleet-id"] == fleet["FleetId"]
        assert i["Placement"]["GroupName"] == "ring" and i["ImageId"] == AMI
        assert i["Placement"]["AvailabilityZone"] == "us-east-1b"


def test_spot_fleet_instances_are_spot_and_single_az_stays_in_one_az(sandbox):
    ec2 = sandbox.client("ec2")
    subnets = _subnets(ec2)
    lt = _template(ec2)
    sandbox.admin.set_capacity("g5.12xlarge", "us-east-1b", available=1)
    overrides = [{"SubnetId": subnets[az]} for az in ("us-east-1b", "us-east-1c", "us-east-1d")]
    fleet = _fleet(ec2, lt, overrides, 3, SpotOptions={"AllocationStrategy": "capacity-optimized",
                                                       "SingleAvailabilityZone": True})
    assert len(_launched(fleet)) == 3
    described = _instances(ec2, InstanceIds=_launched(fleet))
    assert len({i["Placement"]["AvailabilityZone"] for i in described}) == 1
    assert {i["InstanceLifecycle"] for i in described} == {"spot"}


def test_create_fleet_client_token_is_idempotent(sandbox):
    ec2 = sandbox.client("ec2")
    lt = _template(ec2)
    subnet = _subnets(ec2)["us-east-1b"]
    first = _fleet(ec2, lt, [{"SubnetId": subnet}], 2, ClientToken="fleet-1")
    again = _fleet(ec2, lt, [{"SubnetId": subnet}], 2, ClientToken="fleet-1")
    assert again["FleetId"] == first["FleetId"] and _launched(again) == _launched(first)
    assert len(_instances(ec2)) == 2
    with pytest.raises(ClientError) as e:
        _fleet(ec2, lt, [{"SubnetId": subnet}], 3, ClientToken="fleet-1")
    assert _code(e) == "IdempotentParameterMismatch"


def test_deleting_a_fleet_terminates_its_instances(sandbox):
    ec2 = sandbox.client("ec2")
    lt = _template(ec2)
    fleet = _fleet(ec2, lt, [{"SubnetId": _subnets(ec2)["us-east-1b"]}], 2)
    ids = _launched(fleet)
    assert sorted(i["InstanceId"] for i in ec2.describe_fleet_instances(
        FleetId=fleet["FleetId"])["ActiveInstances"]) == sorted(ids)
    ec2.delete_fleets(FleetIds=[fleet["FleetId"]], TerminateInstances=True)
    assert {i["State"]["Name"] for i in _instances(ec2, InstanceIds=ids)} <= {"terminated", "shutting-down"}


def test_fleet_with_efa_interfaces_in_the_template_launches_in_the_overrides_subnet(sandbox):
    ec2 = sandbox.client("ec2")
    subnets = _subnets(ec2)
    sg = ec2.create_security_group(GroupName="efa", Description="all traffic from itself")["GroupId"]
    lt = _template(ec2, InstanceType="p4d.24xlarge", NetworkInterfaces=[
        {"DeviceIndex": 0, "NetworkCardIndex": 0, "InterfaceType": "efa", "Groups": [sg]},
        {"DeviceIndex": 1, "NetworkCardIndex": 1, "InterfaceType": "efa", "Groups": [sg]}])
    fleet = _fleet(ec2, lt, [{"SubnetId": subnets["us-east-1b"]}], 2, market="on-demand")
    assert fleet["Errors"] == [] and len(_launched(fleet)) == 2
    for i in _instances(ec2, InstanceIds=_launched(fleet)):
        assert i["SubnetId"] == subnets["us-east-1b"] and i["Placement"]["AvailabilityZone"] == "us-east-1b"
        assert i["InstanceType"] == "p4d.24xlarge"
