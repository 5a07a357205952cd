"""`trainctl cost JOB` splits an EC2 job's running dollars by market when its instances were of both: a Spot node,
and an On-Demand one launched with the job's tags the way an On-Demand fallback launches a replacement (an
instant EC2 Fleet of the job's launch template, DefaultTargetCapacityType on-demand). DescribeInstances marks the
Spot instance with InstanceLifecycle "spot" and leaves it out for the On-Demand one (EC2 API Reference,
Instance); the On-Demand dollars are its lifetime at the catalog's price, computed here independently."""
from __future__ import annotations

import json
import re
import time
from datetime import datetime, timezone

import pytest

from tests.support.helpers import CONFIGS, run_cli
from trainctl.catalog import load_catalog

REGION = "us-east-1"


def _ended(inst: dict) -> float:
    m = re.search(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:GMT|UTC)\)", inst["StateTransitionReason"])
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()


def _instances(ec2, job: str) -> list[dict]:
    found = ec2.describe_instances(Filters=[{"Name": "tag:trainctl:job", "Values": [job]}])["Reservations"]
    return [i for r in found for i in r["Instances"]]


def _on_demand_like_a_fallback(ec2, job: str, spot: dict) -> str:
    (template,) = ec2.describe_launch_templates(
        Filters=[{"Name": "tag:trainctl:job", "Values": [job]}])["LaunchTemplates"]
    tags = [t for t in spot["Tags"] if not t["Key"].startswith("aws:")]
    placement = {"GroupName": spot["Placement"]["GroupName"]} if spot["Placement"].get("GroupName") else {}
    got = ec2.create_fleet(
        Type="instant",
        LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateId": template["LaunchTemplateId"],
                                                                "Version": "$Latest"},
                                "Overrides": [{"InstanceType": spot["InstanceType"], "SubnetId": spot["SubnetId"],
                                               **({"Placement": placement} if placement else {})}]}],
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"},
        OnDemandOptions={"SingleAvailabilityZone": True, "SingleInstanceType": True, "MinTargetCapacity": 1},
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])
    assert not got.get("Errors"), got["Errors"]
    (ids,) = [i["InstanceIds"] for i in got["Instances"]]
    return ids[0]


def test_cost_shows_the_spot_and_on_demand_dollars_of_an_ec2_job_of_both_markets(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    launch = run_cli(["--output", "json", "--region", REGION, "launch", str(CONFIGS / "vit-base-g5.yaml"),
                      "--platform", "ec2", "--layout", "g5.xlarge:1:spot", "--yes"], home, env=sb.env)
    assert launch.returncode == 0, launch.stderr
    job = json.loads(launch.stdout)["job_id"]
    ec2 = sb.client("ec2", REGION)
    (spot,) = _instances(ec2, job)
    assert spot["InstanceLifecycle"] == "spot"
    od_id = _on_demand_like_a_fallback(ec2, job, spot)
    time.sleep(1.5)  # lifetimes of at least a second (EC2 states launch and end to the second)
    assert run_cli(["down", job], home, env=sb.env).returncode == 0

    od = next(i for i in _instances(ec2, job) if i["InstanceId"] == od_id)
    assert "InstanceLifecycle" not in od and od["State"]["Name"] == "terminated"
    price = load_catalog().on_demand_price("ec2", REGION, od["InstanceType"]).usd_per_hour
    od_usd = (_ended(od) - od["LaunchTime"].timestamp()) / 3600 * price
    assert od_usd > 0

    doc = json.loads(run_cli(["--output", "json", "cost", job], home, env=sb.env).stdout)
    (row,) = doc["jobs"]
    markets = row["running_by_market_usd"]
    assert markets["on-demand"] == pytest.approx(od_usd, abs=1e-6)
    assert markets["spot"] > 0
    assert markets["spot"] + markets["on-demand"] == pytest.approx(row["running_usd"], abs=1e-5)

    shown = run_cli(["cost", job], home, env={**sb.env, "COLUMNS": "120"})
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert f"{job}: Spot ${markets['spot']:,.2f}" in lines or f"{job}: Spot ${markets['spot']:.4f}" in lines
    assert any(line.startswith(f"{job}: On-Demand $") for line in lines)
