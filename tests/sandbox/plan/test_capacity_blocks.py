"""EC2 Capacity Blocks in the plan, through the CLI against the strict sandbox: a block offered for the layout is
an option beside Spot and On-Demand, priced at its upfront fee, ranked by the same objective, and it wins when
Spot misses the deadline and On-Demand is held back, and loses on its fee otherwise. A plan without block
layouts, or offline, has no block option and no `capacity_block` key."""
from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from tests.support.capacity_blocks import block_wins, write_spec
from tests.support.helpers import run_cli


def plan(sandbox, home, spec, *args):
    proc = run_cli(["--output", "json", "plan", spec, "--top", "50", *args], home,
                   env={**sandbox.env, "TRAINCTL_CACHE_TTL": "0"})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def blocks(doc):
    return [o for o in doc["options"] if o["market"] == "capacity-block"]


def test_a_block_wins_when_spot_misses_the_deadline_and_on_demand_is_held_back(sandbox, tmp_path):
    # the job: ~19 h of p4d work; Spot's interruptions take it to ~20.6 wall hours, past the 20.3 h deadline;
    # On-Demand P capacity is refused to the account (quota 0); a block starting in an hour meets the deadline
    # offers start in 1 h, 15 h (asked: it starts before the deadline, but the job would end after it) and 30 h
    # (after the deadline: not asked for)
    doc = plan(sandbox, tmp_path / "home", block_wins(sandbox, tmp_path))
    first = doc["options"][0]
    assert first["market"] == "capacity-block", doc["options"]
    block = first["capacity_block"]
    assert block["wait_hours"] == pytest.approx(1.0, abs=0.05) and block["duration_hours"] == 24
    assert first["expected_cost_usd"] == block["upfront_fee_usd"] == first["cost_p90_usd"]
    assert block["unused_hours"] == pytest.approx(24 - first["hours"], abs=0.01)
    assert first["wall_hours"] == pytest.approx(first["hours"] + block["wait_hours"], abs=0.01)
    assert first["availability_zone"] == block["availability_zone"]
    assert any("cannot be undone" in w for w in first["why"])
    # the block starting in 15 h misses the deadline; Spot misses it too; On-Demand is over quota, ranked last
    assert len(blocks(doc)) == 1
    missed = {(e["market"], e["reason"].split(":")[0]) for e in doc["excluded"]}
    assert ("spot", "misses the deadline") in missed and ("capacity-block", "misses the deadline") in missed
    assert [o["market"] for o in doc["options"]] == ["capacity-block", "on-demand"]
    assert doc["options"][1]["quota_ok"] is False
    # #1 is not said to be cheaper than the On-Demand option it ranks above only for the quota
    assert first["why"][0] == f"lowest expected cost: ${first['expected_cost_usd']:,.2f}", first["why"]


def test_a_block_loses_on_its_fee(sandbox, tmp_path):
    sandbox.admin.action("set_capacity_blocks", start_in_hours=[1], fee_factor=2.0)
    doc = plan(sandbox, tmp_path / "home", write_spec(tmp_path))
    markets = [o["market"] for o in doc["options"]]
    assert markets == ["spot", "on-demand", "capacity-block"], markets
    on_demand, block = doc["options"][1], doc["options"][2]
    assert block["expected_cost_usd"] > 2 * on_demand["expected_cost_usd"] * 0.85
    assert "capacity_block" not in on_demand and "capacity_block" not in doc["options"][0]


def test_no_offer_outside_the_types_aws_sells_and_none_offline(sandbox, tmp_path):
    spec = write_spec(tmp_path)
    offline = plan(sandbox, tmp_path / "home", spec, "--offline")
    assert not blocks(offline) and all("capacity_block" not in o for o in offline["options"])
    sandbox.admin.action("set_capacity_blocks", offered=False)
    live = plan(sandbox, tmp_path / "home", spec)
    assert not blocks(live) and all("capacity_block" not in o for o in live["options"])


def test_the_sandbox_keeps_aws_duration_and_size_rules(sandbox):
    ec2 = sandbox.client("ec2", "us-west-2")
    for bad in ({"CapacityDurationHours": 30, "InstanceCount": 1}, {"CapacityDurationHours": 15 * 24, "InstanceCount": 1},
                {"CapacityDurationHours": 24, "InstanceCount": 65}):
        with pytest.raises(ClientError) as err:
            ec2.describe_capacity_block_offerings(InstanceType="p4d.24xlarge", **bad)
        assert err.value.response["Error"]["Code"] == "InvalidParameterValue"
    offers = ec2.describe_capacity_block_offerings(InstanceType="p4d.24xlarge", InstanceCount=2,
                                                   CapacityDurationHours=21 * 24)["CapacityBlockOfferings"]
    assert offers and all(o["InstanceCount"] == 2 and o["CapacityBlockDurationHours"] == 504 for o in offers)
    assert not ec2.describe_capacity_block_offerings(InstanceType="g5.xlarge", InstanceCount=1,
                                                     CapacityDurationHours=24)["CapacityBlockOfferings"]
    bought = ec2.purchase_capacity_block(CapacityBlockOfferingId=offers[0]["CapacityBlockOfferingId"],
                                         InstancePlatform="Linux/UNIX")["CapacityReservation"]
    assert bought["ReservationType"] == "capacity-block" and bought["State"] == "scheduled"
    with pytest.raises(ClientError):  # an offer is sold once
        ec2.purchase_capacity_block(CapacityBlockOfferingId=offers[0]["CapacityBlockOfferingId"],
                                    InstancePlatform="Linux/UNIX")


def test_a_refused_ask_is_a_warning_and_the_plan_keeps_spot_and_on_demand(sandbox, tmp_path):
    sandbox.admin.throttle("DescribeCapacityBlockOfferings", 20)
    doc = plan(sandbox, tmp_path / "home", write_spec(tmp_path))
    assert not blocks(doc) and {o["market"] for o in doc["options"]} == {"spot", "on-demand"}
    assert any("DescribeCapacityBlockOfferings for 1 x p4d.24xlarge failed" in w for w in doc["warnings"]), \
        doc["warnings"]


def test_a_sagemaker_training_plan_is_offered_beside_on_demand(sandbox, tmp_path):
    """SearchTrainingPlanOfferings for a SageMaker layout AWS reserves: the offer is an option at its fee, said to be
    a training plan (buying it: tests/sandbox/launch_sagemaker/test_training_plan_buy.py)."""
    import yaml

    sandbox.admin.action("set_capacity_blocks", start_in_hours=[1], fee_factor=0.5)
    spec = yaml.safe_load(open(write_spec(tmp_path)))
    spec["candidates"].update(platforms=["sagemaker"], markets=["on-demand"])
    path = tmp_path / "sm.yaml"
    path.write_text(yaml.safe_dump(spec))
    doc = plan(sandbox, tmp_path / "home", str(path))
    (offer,) = blocks(doc)
    assert offer["platform"] == "sagemaker" and offer["capacity_block"]["offering_id"].startswith("tpo-")
    assert offer["expected_cost_usd"] == offer["capacity_block"]["upfront_fee_usd"] > 0
    assert any("SageMaker training plan" in w for w in offer["why"])
