"""`trainctl cost` and doctor's cost allocation tag check, through the CLI against the sandbox over HTTP: the
running and billed dollars of an EC2 Spot job are what the sandbox's own Spot price history and the instances'
lifetimes give, computed here independently of trainctl."""
from __future__ import annotations

import json
import re
import time
from datetime import datetime, timedelta, timezone

from tests.support.cost_tags import activate_job_tag
from tests.support.helpers import CONFIGS, run_cli

REGION = "us-east-1"
ACTIVATE = "aws ce update-cost-allocation-tags-status --cost-allocation-tags-status TagKey=trainctl:job,Status=Active"


def _ended(inst: dict) -> float:
    m = re.search(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:GMT|UTC)\)", inst["StateTransitionReason"])
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()


def _spot_dollars(ec2, inst: dict) -> float:
    """The instance's lifetime at the Spot prices DescribeSpotPriceHistory states for its type and AZ."""
    start, end = inst["LaunchTime"].timestamp(), _ended(inst)
    history = ec2.describe_spot_price_history(
        InstanceTypes=[inst["InstanceType"]], AvailabilityZone=inst["Placement"]["AvailabilityZone"],
        ProductDescriptions=["Linux/UNIX"], StartTime=datetime.fromtimestamp(start, timezone.utc) - timedelta(days=1),
        EndTime=datetime.fromtimestamp(end, timezone.utc))["SpotPriceHistory"]
    points = sorted((p["Timestamp"].timestamp(), float(p["SpotPrice"])) for p in history)
    price = [p for t, p in points if t <= start][-1]
    total, t0 = 0.0, start
    for t, p in points:
        if start < t < end:
            total, t0, price = total + (t - t0) / 3600 * price, t, p
    return total + (end - t0) / 3600 * price


def test_cost_shows_an_ec2_jobs_running_and_billed_dollars_as_the_sandboxs_prices_and_lifetimes_give(
        sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    activate_job_tag(sb)
    launch = run_cli(["--output", "json", "--region", REGION, "launch", str(CONFIGS / "vit-base-g5.yaml"),
                      "--platform", "ec2", "--layout", "g5.xlarge:1:spot", "--yes"], home, env=sb.env)
    assert launch.returncode == 0, launch.stderr
    launched = json.loads(launch.stdout)
    job = launched["job_id"]
    time.sleep(1.5)  # a lifetime of at least a second (EC2 states launch and end to the second)
    assert run_cli(["down", job], home, env=sb.env).returncode == 0
    ec2 = sb.client("ec2", REGION)
    found = ec2.describe_instances(Filters=[{"Name": "tag:trainctl:job", "Values": [job]}])["Reservations"]
    instances = [i for r in found for i in r["Instances"]]
    expected = round(sum(_spot_dollars(ec2, i) for i in instances), 6)
    assert expected > 0

    proc = run_cli(["--output", "json", "cost", job, "--compare"], home, env=sb.env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    (row,) = doc["jobs"]
    assert row["running_usd"] == expected and row["billed_usd"] == expected
    assert row["predicted_usd"] == launched["option"]["expected_cost_usd"]
    assert row["predicted_p90_usd"] == launched["option"]["cost_p90_usd"]
    assert doc["compare"]["compared"] == 1 and "up to a day" in doc["billed_note"]
    assert doc["total"]["billed_usd"] == expected


def test_cost_tables_fit_80_100_and_200_columns_and_group_by_spec(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    launch = run_cli(["--output", "json", "--region", REGION, "launch", str(CONFIGS / "vit-base-g5.yaml"),
                      "--platform", "ec2", "--layout", "g5.xlarge:1:on-demand", "--yes"], home, env=sb.env)
    assert launch.returncode == 0, launch.stderr
    job = json.loads(launch.stdout)["job_id"]
    for width in (80, 100, 200):
        shown = run_cli(["cost"], home, env={**sb.env, "COLUMNS": str(width)})
        assert shown.returncode == 0, shown.stderr
        assert job in shown.stdout and "up to a day" in shown.stdout
        assert max(len(line) for line in shown.stdout.splitlines()) <= width
    grouped = json.loads(run_cli(["--output", "json", "cost", "--group-by", "spec"], home, env=sb.env).stdout)
    assert [g["jobs"] for g in grouped["groups"]] == [1]
    # the tag is not active: Cost Explorer bills nothing to it, and says nothing is billed yet
    assert grouped["jobs"][0]["billed_usd"] is None and grouped["jobs"][0]["running_usd"] is not None
    run_cli(["down", job], home, env=sb.env)


def test_doctor_warns_until_the_job_tag_is_an_active_cost_allocation_tag_and_prints_the_command(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"

    def tag_check() -> dict:
        proc = run_cli(["--output", "json", "--region", REGION, "doctor", "--platform", "ec2"], home, env=sb.env)
        return next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "cost allocation tag")

    first = tag_check()
    assert first["status"] == "warn" and ACTIVATE in first["fix"]
    activate_job_tag(sb)
    assert tag_check()["status"] == "pass"
