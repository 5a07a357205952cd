"""The CLI policy (`trainctl iam-policy --platform ec2`) evaluated against what AWS authorizes for the fleet an
EC2 launch makes (tests/support/ec2_authorization.py, from the exact requests of `launch --dry-run -o json`
against the sandbox), with trainctl's own security group and with a user's untagged one."""
from __future__ import annotations

import json

import pytest

from tests.support.ec2_authorization import fleet_authorizations
from tests.support.helpers import CONFIGS, run_cli
from tests.support.policy_eval import decide
from trainctl import iam


def _dry_run(sb, tmp_path, *extra: str) -> dict:
    proc = run_cli(["--output", "json", "launch", str(CONFIGS / "vit-base-g5.yaml"), "--platform", "ec2",
                    *extra, "--dry-run"], tmp_path / "home", env=sb.env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _refused(doc: dict) -> list[str]:
    policy = iam.cli_policy("ec2")
    region = doc["requests"][0]["region"]
    return [f"{r.action} on {r.resource}: {decide(r, [policy])}"
            for r in fleet_authorizations(doc["requests"], region) if decide(r, [policy]) != "Allow"]


@pytest.mark.parametrize("layout", ["g5.xlarge:2:spot", "g5.xlarge:2:on-demand"])
def test_the_cli_policy_allows_every_resource_the_fleet_is_authorized_against(sandbox_env, tmp_path, layout):
    doc = _dry_run(sandbox_env, tmp_path, "--layout", layout, "--region", "us-east-1")
    assert _refused(doc) == []


def test_the_cli_policy_allows_launching_into_the_users_untagged_security_group(sandbox_env, tmp_path):
    ec2 = sandbox_env.client("ec2", "us-east-1")
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    group = ec2.create_security_group(GroupName="mine", Description="the user's own", VpcId=vpc)["GroupId"]
    doc = _dry_run(sandbox_env, tmp_path, "--layout", "g5.xlarge:2:on-demand", "--region", "us-east-1",
                   "--security-group", group)
    assert not any(r["operation"] == "CreateSecurityGroup" for r in doc["requests"])
    assert _refused(doc) == []
