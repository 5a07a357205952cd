"""`trainctl launch --platform ec2 --dry-run` through the CLI against the sandbox: valid requests, nothing created."""
from __future__ import annotations

import json

import pytest
from botocore.validate import validate_parameters

from tests.support.helpers import CONFIGS, run_cli
from trainctl_sandbox.testing import add_nat


@pytest.mark.parametrize("layout", ["p4d.24xlarge:2:spot", "g5.xlarge:2:on-demand", "trn1.32xlarge:2:spot"])
def test_dry_run_requests_pass_botocore_validation_and_create_nothing(sandbox_env, tmp_path, layout):
    sb = sandbox_env
    if not layout.startswith("g5"):  # several network cards, no public IPv4: the default VPCs behind a NAT
        for region in ("us-east-1", "us-west-2"):
            add_nat(sb, region)
    spec = CONFIGS / ("vit-base-trn1.yaml" if layout.startswith("trn1") else "vit-base-g5.yaml")
    proc = run_cli(["--output", "json", "launch", str(spec), "--platform", "ec2", "--layout", layout, "--dry-run"],
                   tmp_path / "home", env=sb.env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["platform"] == "ec2" and doc["requests"]
    operations = [r["operation"] for r in doc["requests"]]
    assert {"CreatePlacementGroup", "CreateLaunchTemplate", "CreateFleet", "CreateSecurityGroup"} <= set(operations)
    for r in doc["requests"]:
        params = dict(r["params"])
        if r["operation"] == "PutObject":
            assert set(params["Body"]) == {"bytes", "sha256"}  # the tarball, summarised for people
            params["Body"] = b""
        client = sb.client(r["service"], r["region"])
        validate_parameters(params, client.meta.service_model.operation_model(r["operation"]).input_shape)
    region = doc["requests"][0]["region"]
    ec2 = sb.client("ec2", region)
    assert ec2.describe_instances()["Reservations"] == []
    assert ec2.describe_launch_templates()["LaunchTemplates"] == []
    assert ec2.describe_placement_groups()["PlacementGroups"] == []
    assert sb.client("iam").list_roles(PathPrefix="/trainctl/")["Roles"] == []


def test_launch_watch_and_down_through_the_cli(sandbox_env, tmp_path):
    sb = sandbox_env
    home = tmp_path / "home"
    spec = str(CONFIGS / "vit-base-g5.yaml")
    proc = run_cli(["--output", "json", "launch", spec, "--platform", "ec2", "--layout", "g5.xlarge:2:spot", "--yes"],
                   home, env=sb.env)
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)["job_id"]
    assert "ec2:CreateFleet" in proc.stderr
    watch = run_cli(["--output", "json", "watch", job, "--once"], home, env=sb.env)
    doc = json.loads(watch.stdout)
    assert doc["platform"] == "ec2" and doc["status"] == "InProgress" and doc["secondary_status"] == "Training"
    assert len(doc["hosts"]) == 2 and doc["interruptions"] == 0 and doc["cost_usd"] is not None
    down = run_cli(["--output", "json", "down", job], home, env=sb.env)
    assert down.returncode == 0, down.stderr
    removed = json.loads(down.stdout)["removed"]
    assert sum(r.startswith("instance i-") for r in removed) == 2
    region = json.loads(proc.stdout)["region"]
    ec2 = sb.client("ec2", region)
    assert ec2.describe_launch_templates()["LaunchTemplates"] == []
    assert ec2.describe_placement_groups()["PlacementGroups"] == []
    assert json.loads(run_cli(["--output", "json", "down", job], home, env=sb.env).stdout)["removed"] == []


def test_the_launch_s_az_scores_are_the_plan_s(sandbox_env, tmp_path):
    """The plan said "score 10 in us-east-1a" and the EC2 launch "us-east-1a (score 3)": the launch
    asked about one instance type, the plan about the family. Both now ask the same question."""
    import re

    sb = sandbox_env
    args = [str(CONFIGS / "vit-base-g5.yaml"), "--platform", "ec2", "--layout", "g5.2xlarge:4:spot"]
    plan = json.loads(run_cli(["--output", "json", "plan", *args], tmp_path / "home", env=sb.env).stdout)
    proc = run_cli(["--output", "json", "launch", *args, "--dry-run"], tmp_path / "home", env=sb.env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    option = doc["option"]
    planned = next(o for o in plan["options"] if o["rank"] == option["rank"])
    assert planned["availability_zone"] == option["availability_zone"]
    (order,) = [n for n in doc["notes"] if n.startswith("AZ order: ")]
    launch_scores = {az: int(s) for az, s in re.findall(r"(\S+) \(score (\d+)\)", order)}
    assert launch_scores[option["availability_zone"]] == planned["spot_placement_score"] is not None
    assert order.startswith(f"AZ order: {option['availability_zone']} ")


def test_ec2_watch_measures_spot_savings_against_on_demand_for_the_same_hours(sandbox_env, tmp_path):
    """EC2 bills instances: the saving is against the On-Demand price of the same instance-hours, and the
    dollars next to it are shown to the cent's fraction, never a bare "$0.00" beside a saving."""
    import re
    import time

    sb, home = sandbox_env, tmp_path / "home"
    proc = run_cli(["--output", "json", "launch", str(CONFIGS / "vit-base-g5.yaml"), "--platform", "ec2", "--layout",
                    "g5.xlarge:1:spot", "--yes"], home, env=sb.env)
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)["job_id"]
    time.sleep(2)  # some instance-seconds to price
    doc = json.loads(run_cli(["--output", "json", "watch", job, "--once"], home, env=sb.env).stdout)
    assert doc["spot_savings_basis"] == "vs On-Demand for the same instance-hours"
    assert 0 < doc["spot_savings_pct"] < 100 and doc["cost_usd"] > 0
    table = run_cli(["watch", job, "--once"], home, env=sb.env, ).stdout
    # the job still runs: the second look may see a Spot price later, so the figure itself is not compared
    assert re.search(r"Spot savings \d+\.\d% \(vs On-Demand for the same instance-hours\)", " ".join(table.split()))
    assert "$0.00 " not in table and "$0.00," not in table
    assert run_cli(["down", job], home, env=sb.env).returncode == 0
