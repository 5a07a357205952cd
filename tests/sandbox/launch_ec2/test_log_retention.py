"""The EC2 job's log group /trainctl/JOB outlives `down` (its logs stay readable), so the launch makes it with a
retention: 90 days unless `--log-retention-days` says otherwise, one of the values CloudWatch Logs accepts."""
from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from tests.support.helpers import CONFIGS, run_cli

REGION = "us-east-1"


def _launch(sb, tmp_path, *extra: str):
    return run_cli(["--output", "json", "launch", str(CONFIGS / "vit-base-g5.yaml"), "--platform", "ec2",
                    "--layout", "g5.xlarge:1:on-demand", "--region", REGION, "--yes", *extra],
                   tmp_path / "home", env=sb.env)


def _retention(sb, job: str):
    groups = sb.client("logs", REGION).describe_log_groups(logGroupNamePrefix=f"/trainctl/{job}")["logGroups"]
    return [g.get("retentionInDays") for g in groups]


@pytest.mark.parametrize("extra,days", [((), 90), (("--log-retention-days", "14"), 14)])
def test_the_job_log_group_expires_its_events(sandbox_env, tmp_path, extra, days):
    proc = _launch(sandbox_env, tmp_path, *extra)
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)["job_id"]
    assert _retention(sandbox_env, job) == [days]
    assert run_cli(["down", job], tmp_path / "home", env=sandbox_env.env).returncode == 0
    assert _retention(sandbox_env, job) == [days]  # down leaves the group; its events expire


def test_a_retention_cloudwatch_does_not_offer_is_one_line_before_anything(sandbox_env, tmp_path):
    proc = _launch(sandbox_env, tmp_path, "--log-retention-days", "10")
    assert proc.returncode != 0 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--log-retention-days 10" in lines[0] and "use 7" in lines[0], lines
    assert sandbox_env.client("iam").list_roles(PathPrefix="/trainctl/")["Roles"] == []


def test_the_sandbox_refuses_a_retention_aws_refuses(sandbox_env):
    logs = sandbox_env.client("logs", REGION)
    logs.create_log_group(logGroupName="/trainctl/some-job")
    with pytest.raises(ClientError, match="retentionInDays"):
        logs.put_retention_policy(logGroupName="/trainctl/some-job", retentionInDays=10)
    logs.put_retention_policy(logGroupName="/trainctl/some-job", retentionInDays=7)
