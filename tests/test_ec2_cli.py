"""`trainctl launch --platform ec2 --dry-run` through the CLI against the sandbox: valid requests, nothing created."""
from __future__ import annotations

import json

import pytest
from botocore.validate import validate_parameters

from tests.helpers import CONFIGS, run_cli
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
