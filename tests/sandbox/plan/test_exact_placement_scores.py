"""Every placement score the plan shows is for exactly the request its launch makes: a fixed layout's score is
asked with InstanceTypes=[its type], TargetCapacity=its nodes, in units (EC2 User Guide: a score "is only relevant
if your Spot request has exactly the same configuration"), never for its family. Only the best-ranked fixed layouts
are asked, within AWS's daily budget of new configurations. Through the CLI against the strict sandbox, the
requests read back from the sandbox's record of the configurations asked."""
from __future__ import annotations

import json

from tests.support.helpers import CONFIGS, run_cli
from trainctl.aws.placement import FIXED_SCORES_PER_PLAN

SPEC = str(CONFIGS / "vit-base-g5.yaml")
ACCOUNT = "123456789012"
FIXED = ["--platform", "ec2", "--region", "us-east-1", "--layout", "g5.2xlarge:4:spot",
         "--layout", "g5.4xlarge:4:spot"]


def asked(sandbox) -> list[list]:
    """The configurations this account asked: [types, capacity, unit, single AZ] each."""
    spent = sandbox.admin.action("set_score_config_limit")["configurations"].get(ACCOUNT, [])
    return [json.loads(c) for c in spent]


def exact_scores(sandbox, itype: str, count: int) -> dict[str, int]:
    ec2 = sandbox.client("ec2")
    names = {z["ZoneId"]: z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    answer = ec2.get_spot_placement_scores(InstanceTypes=[itype], TargetCapacity=count, TargetCapacityUnitType="units",
                                           SingleAvailabilityZone=True, RegionNames=["us-east-1"])
    return {names[s["AvailabilityZoneId"]]: s["Score"] for s in answer["SpotPlacementScores"]}


def test_each_fixed_layout_shows_the_score_of_its_own_type_and_count(sandbox, tmp_path):
    sandbox.admin.set_capacity("g5.2xlarge", available=False)   # every AZ: one type has no room, its family has
    proc = run_cli(["-o", "json", "plan", SPEC, *FIXED], tmp_path / "home", env=sandbox.env)
    assert proc.returncode == 0, proc.stderr
    spot = {o["instance_type"]: o for o in json.loads(proc.stdout)["options"] if o["market"] == "spot"}
    configs = asked(sandbox)
    # the plan asked exactly the launches' configurations, and nothing for a family
    assert [["g5.2xlarge"], 4, "units", True] in configs and [["g5.4xlarge"], 4, "units", True] in configs
    assert all(len(types) == 1 for types, *_ in configs), configs
    for itype in ("g5.2xlarge", "g5.4xlarge"):
        option = spot[itype]
        truth = exact_scores(sandbox, itype, 4)
        assert option["spot_placement_score"] == truth[option["availability_zone"]] == max(truth.values())
        assert option["capacity_odds"] is None   # one type scores low by AWS's design: no odds from it
        assert any(w.startswith(f"placement score {option['spot_placement_score']}/10 for 4 nodes") and
                   f"asked for 1 type ({itype})" in w for w in option["why"]), option["why"]
    assert spot["g5.2xlarge"]["spot_placement_score"] < spot["g5.4xlarge"]["spot_placement_score"]


def test_a_plan_asks_the_exact_scores_of_its_best_fixed_layouts_only(sandbox, tmp_path):
    proc = run_cli(["-o", "json", "plan", SPEC, "--platform", "ec2", "--region", "us-east-1"], tmp_path / "home",
                   env=sandbox.env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    fixed = [o for o in doc["options"] if o["market"] == "spot" and len(o["instance_types"]) == 1]
    single = [(types[0], count) for types, count, *_ in asked(sandbox) if len(types) == 1]
    assert len(set(single)) == FIXED_SCORES_PER_PLAN < len({(o["instance_type"], o["count"]) for o in fixed})
    scored = [o for o in fixed if o["spot_placement_score"] is not None]
    assert scored and all((o["instance_type"], o["count"]) in single for o in scored)
    for o in scored[:3]:
        assert o["spot_placement_score"] == exact_scores(sandbox, o["instance_type"], o["count"])[o["availability_zone"]]
    assert fixed[0]["spot_placement_score"] is not None   # the best fixed layout always has its own score
    assert any("best-ranked fixed Spot layouts only" in w for w in doc["warnings"]), doc["warnings"]
