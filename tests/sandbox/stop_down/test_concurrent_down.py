"""Two `down`s of one job at once both succeed: what the other one removed meanwhile is done, not an error.
The first `down` is held inside DeleteRole (sandbox latency) while the second one runs over the same role."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.support.helpers import CONFIGS, ROOT, clean_env, run_cli

LAUNCH = ["--output", "json", "launch", str(CONFIGS / "vit-base-g5.yaml"), "--platform", "ec2", "--layout",
          "g5.xlarge:1:spot", "--yes"]


def _count(sb, operation: str) -> int:
    return sum(c["count"] for c in sb.admin.call_log() if c["operation"] == operation)


@pytest.mark.timeout(300)
def test_two_downs_of_one_job_at_once_both_succeed(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    launched = run_cli(LAUNCH, home, env=sb.env)
    assert launched.returncode == 0, launched.stderr
    job = json.loads(launched.stdout)["job_id"]
    before = _count(sb, "DeleteRole")
    sb.admin.set_latency("DeleteRole", 15_000)  # longer than the second down takes to reach it
    first = subprocess.Popen([sys.executable, "-m", "trainctl.cli", "down", job], cwd=ROOT, env=clean_env(home, sb.env),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while _count(sb, "DeleteRole") == before:  # the first down is removing the role: the second one starts
            assert first.poll() is None, first.communicate()
            time.sleep(0.02)
        second = run_cli(["down", job], home, env=sb.env)
        out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
        sb.admin.set_latency("DeleteRole", 0)
    assert first.returncode == 0, err
    assert second.returncode == 0, second.stderr
    assert sb.client("iam").list_roles(PathPrefix="/trainctl/")["Roles"] == []
