"""GetSpotPlacementScores and DescribeSpotPriceHistory, through boto3 against the running sandbox."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from botocore.exceptions import ClientError

from trainctl.catalog import load_catalog

G5 = ["g5.12xlarge", "g5.24xlarge", "g5.48xlarge"]


def _scores(ec2, **kw) -> list[dict]:
    kw.setdefault("TargetCapacity", 2)
    out, token = [], None
    while True:
        resp = ec2.get_spot_placement_scores(**kw, **({"NextToken": token} if token else {}))
        out += resp["SpotPlacementScores"]
        token = resp.get("NextToken")
        if not token:
            return out


def test_single_az_scores_name_the_az_ids_describe_availability_zones_gives(sandbox):
    for region in ("us-east-1", "us-west-2"):
        ec2 = sandbox.client("ec2", region)
        ids = {z["ZoneId"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
        scores = _scores(ec2, InstanceTypes=G5, SingleAvailabilityZone=True, RegionNames=[region])
        assert {s["AvailabilityZoneId"] for s in scores} == ids
        assert all(s["Region"] == region and 1 <= s["Score"] <= 10 for s in scores)
        assert [s["Score"] for s in scores] == sorted((s["Score"] for s in scores), reverse=True)


def test_region_scores_have_no_az(sandbox):
    scores = _scores(sandbox.client("ec2"), InstanceTypes=G5, RegionNames=["us-east-1", "us-west-2"])
    assert sorted(s["Region"] for s in scores) == ["us-east-1", "us-west-2"]
    assert all("AvailabilityZoneId" not in s for s in scores)


def test_bigger_asks_never_score_higher(sandbox):
    ec2 = sandbox.client("ec2")
    previous = None
    for capacity in (1, 4, 16, 64, 256):
        now = {s["AvailabilityZoneId"]: s["Score"] for s in _scores(
            ec2, InstanceTypes=G5, TargetCapacity=capacity, SingleAvailabilityZone=True, RegionNames=["us-east-1"])}
        if previous:
            assert all(now[z] <= previous[z] for z in now)
        previous = now
    assert min(previous.values()) == 1  # 256 big GPU boxes in one AZ is more than any pool has


def test_capacity_in_vcpus_scores_like_the_same_ask_in_instances(sandbox):
    ec2 = sandbox.client("ec2")
    common = dict(InstanceTypes=["g5.12xlarge"], SingleAvailabilityZone=True, RegionNames=["us-east-1"])
    units = _scores(ec2, TargetCapacity=4, **common)
    vcpus = _scores(ec2, TargetCapacity=4 * 48, TargetCapacityUnitType="vcpu", **common)
    assert units == vcpus


def test_fewer_than_three_types_score_low(sandbox):
    ec2 = sandbox.client("ec2")
    common = dict(TargetCapacity=1, SingleAvailabilityZone=True, RegionNames=["us-east-1", "us-west-2"])
    assert max(s["Score"] for s in _scores(ec2, InstanceTypes=G5[:2], **common)) <= 3
    assert max(s["Score"] for s in _scores(ec2, InstanceTypes=G5, **common)) > 3


def test_scores_follow_the_seed_and_capacity_faults(sandbox):
    ec2 = sandbox.client("ec2")
    ask = dict(InstanceTypes=G5, TargetCapacity=8, SingleAvailabilityZone=True, RegionNames=["us-east-1", "us-west-2"])
    first = _scores(ec2, **ask)
    assert _scores(ec2, **ask) == first
    sandbox.admin.reset(seed=7)
    assert _scores(ec2, **ask) != first
    sandbox.admin.reset(seed=0)
    assert _scores(ec2, **ask) == first
    zone = ec2.describe_availability_zones(ZoneNames=["us-east-1a"])["AvailabilityZones"][0]["ZoneId"]
    for t in G5:
        sandbox.admin.set_capacity(t, "us-east-1a", available=False)
    after = {s["AvailabilityZoneId"]: s["Score"] for s in _scores(ec2, **ask)}
    assert after[zone] == 1


def test_scores_page_with_max_results_and_next_token(sandbox):
    ec2 = sandbox.client("ec2")
    ask = dict(InstanceTypes=G5, TargetCapacity=2, SingleAvailabilityZone=True,
               RegionNames=["us-east-1", "us-west-2", "us-east-2"])
    first = ec2.get_spot_placement_scores(MaxResults=10, **ask)
    assert len(first["SpotPlacementScores"]) == 10 and first["NextToken"]
    everything = _scores(ec2, MaxResults=10, **ask)
    assert everything[:10] == first["SpotPlacementScores"]
    assert len({(s["Region"], s["AvailabilityZoneId"]) for s in everything}) == len(everything) == 13


def test_score_requests_are_validated(sandbox):
    ec2 = sandbox.client("ec2")
    with pytest.raises(ClientError) as e:
        ec2.get_spot_placement_scores(InstanceTypes=["g5.nonsense"], TargetCapacity=1)
    assert e.value.response["Error"]["Code"] == "InvalidParameterValue"
    with pytest.raises(ClientError) as e:
        ec2.get_spot_placement_scores(TargetCapacity=1)
    assert e.value.response["Error"]["Code"] == "InvalidParameterCombination"


def test_instance_requirements_pick_matching_types(sandbox):
    scores = _scores(sandbox.client("ec2"), TargetCapacity=1, RegionNames=["us-east-1"], InstanceRequirementsWithMetadata={
        "ArchitectureTypes": ["x86_64"],
        "InstanceRequirements": {"VCpuCount": {"Min": 48, "Max": 48}, "MemoryMiB": {"Min": 1},
                                 "AcceleratorCount": {"Min": 4}, "AcceleratorManufacturers": ["nvidia"]}})
    assert len(scores) == 1 and scores[0]["Score"] >= 1


# ----------------------------------------------------------------------------- Spot price history
def _history(ec2, **kw) -> list[dict]:
    return [p for page in ec2.get_paginator("describe_spot_price_history").paginate(**kw)
            for p in page["SpotPriceHistory"]]


def test_prices_derive_from_the_catalog_differ_per_az_and_move(sandbox):
    ec2 = sandbox.client("ec2")
    end = datetime.now(timezone.utc)
    start = end - timedelta(days=3)
    points = _history(ec2, InstanceTypes=["g5.12xlarge"], ProductDescriptions=["Linux/UNIX"],
                      StartTime=start, EndTime=end)
    catalog = load_catalog()
    od = catalog.on_demand_price("ec2", "us-east-1", "g5.12xlarge").usd_per_hour
    level = od * (1 - catalog.spot_advice("us-east-1", "g5.12xlarge").savings_pct / 100)
    prices = [float(p["SpotPrice"]) for p in points]
    assert all(level / 3 <= p <= od for p in prices)
    assert abs(sum(prices) / len(prices) - level) / level < 0.25
    by_az: dict[str, list[dict]] = {}
    for p in points:
        by_az.setdefault(p["AvailabilityZone"], []).append(p)
    assert len(by_az) >= 3
    assert len({ps[0]["SpotPrice"] for ps in by_az.values()}) > 1          # AZs differ
    for ps in by_az.values():
        assert len({p["SpotPrice"] for p in ps}) > 3                       # prices move over 3 days
        stamps = [p["Timestamp"] for p in ps]
        assert stamps == sorted(stamps, reverse=True)                      # newest first
        assert stamps[-1] <= start < stamps[-2]                            # the price in force at StartTime
        assert stamps[0] <= end


def test_history_filters(sandbox):
    ec2 = sandbox.client("ec2")
    end = datetime.now(timezone.utc)
    start = end - timedelta(hours=12)
    common = dict(StartTime=start, EndTime=end, InstanceTypes=["g5.xlarge", "p4d.24xlarge"])
    one_az = _history(ec2, AvailabilityZone="us-east-1c", **common)
    assert one_az and {p["AvailabilityZone"] for p in one_az} == {"us-east-1c"}
    by_filter = _history(ec2, Filters=[{"Name": "availability-zone", "Values": ["us-east-1c"]}], **common)
    assert by_filter == one_az
    zone_id = ec2.describe_availability_zones(ZoneNames=["us-east-1c"])["AvailabilityZones"][0]["ZoneId"]
    assert _history(ec2, AvailabilityZoneId=zone_id, **common) == one_az
    assert {p["AvailabilityZoneId"] for p in one_az} == {zone_id}
    plain = _history(ec2, ProductDescriptions=["Linux/UNIX"], **common)
    vpc = _history(ec2, ProductDescriptions=["Linux/UNIX (Amazon VPC)"], **common)
    assert [p["SpotPrice"] for p in plain] == [p["SpotPrice"] for p in vpc]
    assert {p["InstanceType"] for p in plain} == {"g5.xlarge", "p4d.24xlarge"}
    assert _history(ec2, ProductDescriptions=["Windows"], **common) == []


def test_history_pages_join_up(sandbox):
    ec2 = sandbox.client("ec2")
    end = datetime.now(timezone.utc)
    kw = dict(InstanceTypes=["g5.2xlarge"], StartTime=end - timedelta(days=2), EndTime=end)
    whole = ec2.describe_spot_price_history(**kw)
    assert "NextToken" not in whole or not whole["NextToken"]
    first = ec2.describe_spot_price_history(MaxResults=7, **kw)
    assert len(first["SpotPriceHistory"]) == 7 and first["NextToken"]
    paged = _history(ec2, PaginationConfig={"PageSize": 7}, **kw)
    assert paged == whole["SpotPriceHistory"]


def test_history_is_deterministic_for_a_seed(sandbox):
    ec2 = sandbox.client("ec2")
    end = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
    kw = dict(InstanceTypes=["g5.4xlarge"], StartTime=end - timedelta(days=1), EndTime=end)
    first = ec2.describe_spot_price_history(**kw)["SpotPriceHistory"]
    assert ec2.describe_spot_price_history(**kw)["SpotPriceHistory"] == first
    sandbox.admin.reset(seed=3)
    assert ec2.describe_spot_price_history(**kw)["SpotPriceHistory"] != first
