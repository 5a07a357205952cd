"""Flexible layouts: N identical nodes of any of several types with the same accelerators. The plan prices them
on their worst type and scores exactly their set; the EC2 launch is one fleet per AZ with an override per type;
recovery takes any of the types; SageMaker tries them one after the other. Through the CLI against the strict
sandbox (the plan offline: tests/cli/test_flexible_layouts_plan.py)."""
from __future__ import annotations

import json

from tests.support.helpers import CONFIGS, run_cli

SPEC = str(CONFIGS / "vit-base-g5.yaml")
ONE_A10G = ["g5.xlarge", "g5.2xlarge", "g5.4xlarge", "g5.8xlarge", "g5.16xlarge"]
THREE = "g5.2xlarge|g5.4xlarge|g5.8xlarge"
EAST = ["--region", "us-east-1"]


def plan(home, *args, env=None) -> dict:
    proc = run_cli(["-o", "json", *EAST, "plan", SPEC, *args], home, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def live(ec2, job_id: str) -> list[dict]:
    return [i for r in ec2.describe_instances(Filters=[{"Name": "tag:trainctl:job", "Values": [job_id]}])
            ["Reservations"] for i in r["Instances"] if i["State"]["Name"] in ("pending", "running")]


def test_a_flexible_layout_is_scored_for_exactly_its_types_and_count(sandbox_env, tmp_path):
    sb = sandbox_env
    doc = plan(tmp_path / "home", "--platform", "ec2", "--layout", f"{THREE}:4:spot", env=sb.env)
    option = doc["options"][0]
    asked = sb.admin.action("set_score_config_limit")["configurations"]["123456789012"]
    exact = json.dumps([sorted(THREE.split("|")), 4, "units", True], sort_keys=True)
    assert exact in asked
    scores = sb.client("ec2").get_spot_placement_scores(
        InstanceTypes=sorted(THREE.split("|")), TargetCapacity=4, SingleAvailabilityZone=True,
        RegionNames=["us-east-1"])["SpotPlacementScores"]
    azs = {z["ZoneId"]: z["ZoneName"] for z in sb.client("ec2").describe_availability_zones()["AvailabilityZones"]}
    by_name = {azs[s["AvailabilityZoneId"]]: s["Score"] for s in scores}
    assert option["spot_placement_score"] == by_name[option["availability_zone"]] == max(by_name.values())
    assert option["capacity_odds"] == option["spot_placement_score"] / 10


def test_the_dry_run_fleet_has_an_override_per_type_with_priorities_and_no_spot_price_cap(sandbox_env, tmp_path):
    sb = sandbox_env
    proc = run_cli(["-o", "json", *EAST, "launch", SPEC, "--platform", "ec2", "--layout", "g5:1xA10G:4:spot",
                    "--dry-run"], tmp_path / "home", env=sb.env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    option = doc["option"]
    fleets = [r["params"] for r in doc["requests"] if r["operation"] == "CreateFleet"]
    assert fleets
    for fleet in fleets:
        overrides = fleet["LaunchTemplateConfigs"][0]["Overrides"]
        priority = {o["InstanceType"]: o["Priority"] for o in overrides}
        assert priority == {t: option["instance_types"].index(t) for t in priority}
        assert set(priority) <= set(ONE_A10G) and len(priority) >= 3
        spot = fleet["SpotOptions"]
        assert spot["AllocationStrategy"] == "capacity-optimized-prioritized"
        assert spot["SingleInstanceType"] and spot["SingleAvailabilityZone"] and spot["MinTargetCapacity"] == 4
        # AWS advises against MaxTotalPrice on Spot (SpotOptionsRequest: "can lead to increased interruptions")
        assert "MaxTotalPrice" not in spot
    summary = run_cli([*EAST, "launch", SPEC, "--platform", "ec2", "--layout", "g5:1xA10G:4:spot", "--dry-run"],
                      tmp_path / "home", env={**sb.env, "COLUMNS": "200"})
    assert "MaxTotalPrice" not in summary.stdout.split("CreateFleet", 1)[-1].split("CreateLaunchTemplate")[0]
    assert "identical nodes of any of" in summary.stdout
    template = next(r["params"] for r in doc["requests"] if r["operation"] == "CreateLaunchTemplate")
    # g5.xlarge ... g5.4xlarge have no EFA: the one template has none, so every member boots from it
    assert "NetworkInterfaces" not in template["LaunchTemplateData"]


def test_one_type_without_capacity_fixed_fails_over_and_flexible_launches_at_once(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    sb.admin.set_capacity("g5.8xlarge", available=False)   # every AZ
    fixed = run_cli(["-o", "json", *EAST, "launch", SPEC, "--platform", "ec2", "--layout", "g5.8xlarge:4:spot",
                     "--layout", "g5.4xlarge:4:spot", "--yes", "--failover"], home, env=sb.env)
    assert fixed.returncode == 0, fixed.stderr
    refused, ran = json.loads(fixed.stdout)["attempts"]
    assert refused["layout"] == "g5.8xlarge:4:spot" and refused["outcome"].startswith("no capacity")
    assert ran["layout"] == "g5.4xlarge:4:spot" and ran["outcome"] == "running"
    flexible = run_cli(["-o", "json", *EAST, "launch", SPEC, "--platform", "ec2", "--layout", f"{THREE}:4:spot",
                        "--yes", "--allow-duplicate"], home, env=sb.env)
    assert flexible.returncode == 0, flexible.stderr
    out = json.loads(flexible.stdout)
    assert [a["outcome"] for a in out["attempts"]] == ["submitted"]   # one attempt: no failover needed
    assert out["option"]["instance_types"][0] == "g5.8xlarge"   # its first priority had no capacity
    nodes = live(sb.client("ec2"), out["job_id"])
    assert len(nodes) == 4 and len({i["InstanceType"] for i in nodes}) == 1
    assert nodes[0]["InstanceType"] in ("g5.2xlarge", "g5.4xlarge")
    for job in (ran["job_id"], out["job_id"]):
        assert run_cli(["down", job], home, env=sb.env).returncode == 0


def test_recovery_keeps_the_survivors_type_and_else_takes_any_allowed_type(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    ec2 = sb.client("ec2")
    top = plan(home, "--platform", "ec2", "--layout", f"{THREE}:2:spot", env=sb.env)["options"][0]["instance_types"][0]
    sb.admin.set_capacity(top, available=False)   # its first priority: the launch gets another type
    launched = run_cli(["-o", "json", *EAST, "launch", SPEC, "--platform", "ec2", "--layout", f"{THREE}:2:spot",
                        "--yes"], home, env=sb.env)
    assert launched.returncode == 0, launched.stderr
    job = json.loads(launched.stdout)["job_id"]
    first = live(ec2, job)
    kept, az = first[0]["InstanceType"], first[0]["Placement"]["AvailabilityZone"]
    assert kept != top
    sb.admin.set_capacity(top, available=True)

    def reclaim_one_and_recover() -> dict:
        before = live(ec2, job)
        # EC2's Spot reclaim (the notice, then Server.SpotInstanceTermination): the only loss recovery replaces
        sb.admin.action("reclaim_spot_instances", job=job, instance_ids=[before[1]["InstanceId"]])
        recovered = run_cli(["-o", "json", "watch", job, "--once", "--recover"], home, env=sb.env)
        assert recovered.returncode == 0, recovered.stderr
        now = live(ec2, job)
        assert len(now) == 2 and {i["Placement"]["AvailabilityZone"] for i in now} == {az}
        return next(i for i in now if i["InstanceId"] not in {b["InstanceId"] for b in before})

    # room for the survivors' type: the replacement is of that type, though the first priority has room again
    assert reclaim_one_and_recover()["InstanceType"] == kept
    # none left of it in the AZ: any other type of the layout, in the same AZ
    sb.admin.set_capacity(kept, az, available=False)
    new = reclaim_one_and_recover()
    assert new["InstanceType"] in THREE.split("|") and new["InstanceType"] != kept
    assert run_cli(["down", job], home, env=sb.env).returncode == 0


def test_a_flexible_sagemaker_option_is_one_type_per_job(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    doc = plan(home, "--platform", "sagemaker", "--layout", f"{THREE}:1:spot", env=sb.env)
    option = doc["options"][0]
    assert any("SageMaker takes one type per job" in w and "--failover" in w for w in option["why"])
    proc = run_cli(["-o", "json", *EAST, "launch", SPEC, "--platform", "sagemaker", "--layout", f"{THREE}:1:spot",
                    "--dry-run"], home, env=sb.env)
    assert proc.returncode == 0, proc.stderr
    job = next(r["params"] for r in json.loads(proc.stdout)["requests"] if r["operation"] == "CreateTrainingJob")
    assert job["ResourceConfig"]["InstanceType"] == f"ml.{option['instance_types'][0]}"
    assert "SageMaker takes one type per job" in proc.stderr


def test_flexible_layouts_spend_one_configuration_per_set_and_count_and_the_launch_none(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    no_cache = {**sb.env, "TRAINCTL_CACHE_TTL": "0"}   # the same configuration asked again is what is free

    def spent() -> list[str]:
        return sb.admin.action("set_score_config_limit")["configurations"].get("123456789012", [])

    # two types score low by AWS's design: not worth a configuration
    pair = plan(home, "--platform", "ec2", "--layout", "g5:4xA10G:2:spot", env=no_cache)["options"][0]
    assert pair["spot_placement_score"] is None and spent() == []
    assert any("placement score not asked: 2 types" in w for w in pair["why"])
    plan(home, "--platform", "ec2", "--layout", f"{THREE}:4:spot", env=no_cache)
    planned = spent()
    assert planned == [json.dumps([sorted(THREE.split("|")), 4, "units", True], sort_keys=True)]
    sb.admin.action("set_score_config_limit", limit=len(planned))   # nothing new may be asked now
    dry = run_cli(["-o", "json", *EAST, "launch", SPEC, "--platform", "ec2", "--layout", f"{THREE}:4:spot",
                   "--dry-run"], home, env=no_cache)
    assert dry.returncode == 0, dry.stderr
    notes = json.loads(dry.stdout)["notes"]
    assert any(n.startswith("AZ order:") for n in notes) and not any("no Spot placement scores" in n for n in notes)
    assert spent() == planned
