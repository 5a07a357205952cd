"""GetSpotPlacementScores limits new configurations per account per 24 h
(MaxConfigLimitExceeded); a refusal keeps the region with the score unknown; `launch` and `doctor` ask no
configuration the plan did not ask; scores of one or two types are never turned into capacity odds, and the
plan says scores compare only within one configuration. Through the CLI against the strict sandbox."""
from __future__ import annotations

import json

import pytest

from tests.support.helpers import CONFIGS, run_cli

SPEC = str(CONFIGS / "vit-base-g5.yaml")
SPOT = ["--platform", "ec2", "--layout", "g5.xlarge:2:spot"]
THREE = "g5.2xlarge|g5.4xlarge|g5.8xlarge"
NO_CACHE = {"TRAINCTL_CACHE_TTL": "0"}  # the same configuration asked again, not a cache hit, is what is free


def spent(sandbox) -> list[str]:
    return sandbox.admin.action("set_score_config_limit")["configurations"].get("123456789012", [])


def cli(sandbox, home, *args, env=None):
    return run_cli(list(args), home, env={**sandbox.env, **(env or NO_CACHE)})


def test_the_sandbox_limits_new_configurations_per_account(sandbox):
    ec2 = sandbox.client("ec2")
    sandbox.admin.action("set_score_config_limit", limit=2)

    def ask(types, count=1, regions=("us-east-1",)):
        return ec2.get_spot_placement_scores(InstanceTypes=list(types), TargetCapacity=count,
                                             SingleAvailabilityZone=True, RegionNames=list(regions))

    ask(["g5.xlarge", "g5.2xlarge", "g5.4xlarge"])
    ask(["g5.xlarge", "g5.2xlarge", "g5.4xlarge"], 2)
    with pytest.raises(ec2.exceptions.ClientError) as e:
        ask(["g6.xlarge", "g6.2xlarge", "g6.4xlarge"])
    assert e.value.response["Error"]["Code"] == "MaxConfigLimitExceeded"
    assert "wait for 24 hours before specifying a new configuration" in e.value.response["Error"]["Message"]
    # a configuration used within the last 24 hours may be asked again, in any Region
    assert ask(["g5.4xlarge", "g5.2xlarge", "g5.xlarge"], 1, ("us-west-2",))["SpotPlacementScores"]
    assert len(spent(sandbox)) == 2


def test_launch_and_doctor_ask_no_configuration_the_plan_did_not(sandbox, tmp_path):
    home = tmp_path / "home"
    doc = json.loads(cli(sandbox, home, "-o", "json", "plan", SPEC).stdout)
    planned = spent(sandbox)
    assert planned
    sandbox.admin.action("set_score_config_limit", limit=len(planned))  # the budget is spent: nothing new
    best = next(o for o in doc["options"] if o["market"] == "spot" and o["platform"] == "ec2" and
                o["spot_placement_score"] is not None)
    layout = ["--platform", "ec2", "--region", best["region"], "--layout", f"{best['instance_type']}:{best['count']}:spot"]
    dry = json.loads(cli(sandbox, home, "-o", "json", "launch", SPEC, *layout, "--dry-run").stdout)
    assert not any("no Spot placement scores" in n for n in dry["notes"]), dry["notes"]
    assert any(n.startswith("AZ order:") for n in dry["notes"]) or dry["option"]["count"] == 1
    doc = json.loads(cli(sandbox, home, "-o", "json", "doctor", SPEC, "--platform", "ec2").stdout)
    assert next(c for c in doc["checks"] if c["name"] == "Spot placement scores")["status"] == "pass"
    assert spent(sandbox) == planned


def test_a_spent_budget_keeps_the_region_with_the_score_unknown(sandbox, tmp_path):
    sandbox.admin.action("set_score_config_limit", limit=0)
    proc = cli(sandbox, tmp_path / "home", "-o", "json", "plan", SPEC, *SPOT)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    spot = [o for o in doc["options"] if o["market"] == "spot"]
    assert {o["region"] for o in spot} == {"us-east-1", "us-west-2"}
    assert all(o["spot_placement_score"] is None and o["capacity_odds"] is None for o in spot)
    assert any("GetSpotPlacementScores refused" in w and "MaxConfigLimitExceeded" in w for w in doc["warnings"])


def test_scores_of_fewer_than_three_types_are_not_capacity_odds(sandbox, tmp_path):
    # A fixed layout is scored for its one type, as it launches: low by design. A flexible set of three is not.
    args = ["--platform", "ec2", "--layout", "p5.48xlarge:1:spot", "--layout", "g5.xlarge:2:spot",
            "--layout", f"{THREE}:2:spot"]
    doc = json.loads(cli(sandbox, tmp_path / "home", "-o", "json", "plan", SPEC, *args).stdout)
    fixed = [o for o in doc["options"] if o["instance_type"] in ("p5.48xlarge", "g5.xlarge") and not o["flexible_group"]]
    flexible = [o for o in doc["options"] if o["flexible_group"]]
    assert fixed and all(o["spot_placement_score"] is not None and o["capacity_odds"] is None for o in fixed)
    assert all(any("not taken as capacity odds" in w for w in o["why"]) for o in fixed)
    assert flexible and all(o["capacity_odds"] == o["spot_placement_score"] / 10 for o in flexible)
    assert any("compare only within one configuration" in w for w in doc["warnings"])
    table = cli(sandbox, tmp_path / "home", "plan", SPEC, *args, env={**NO_CACHE, "COLUMNS": "200"})
    assert "compare only within one configuration" in " ".join(table.stdout.split())


def test_the_configuration_warning_appears_only_where_it_changed_an_option(sandbox, tmp_path):
    # a flexible set of three types: its score is taken as capacity odds, so nothing to warn about
    args = ["--platform", "ec2", "--layout", f"{THREE}:2:spot"]
    doc = json.loads(cli(sandbox, tmp_path / "home", "-o", "json", "plan", SPEC, *args).stdout)
    spot = [o for o in doc["options"] if o["market"] == "spot"]
    assert spot and all(o["capacity_odds"] is not None for o in spot)
    assert not any("compare only within one configuration" in w for w in doc["warnings"]), doc["warnings"]
