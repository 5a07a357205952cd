"""Ctrl-C during `stop`'s grace says exactly which nodes are left running and how to end them. The sandbox's
EC2 nodes run no agent, so they never stop by themselves: the grace runs until the Ctrl-C."""
from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from tests.support.helpers import CONFIGS, ROOT, clean_env, run_cli

LAUNCH = ["--output", "json", "launch", str(CONFIGS / "vit-base-g5.yaml"), "--platform", "ec2", "--layout",
          "g5.xlarge:1:spot", "--yes"]


@pytest.mark.timeout(300)
def test_ctrl_c_during_the_grace_names_the_nodes_left_running(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    launched = run_cli(LAUNCH, home, env=sb.env)
    assert launched.returncode == 0, launched.stderr
    job = json.loads(launched.stdout)["job_id"]
    proc = subprocess.Popen([sys.executable, "-m", "trainctl.cli", "stop", job, "--grace-seconds", "600"], cwd=ROOT,
                            env=clean_env(home, sb.env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = []
        for line in proc.stderr:  # until the grace has begun
            seen.append(line)
            if "waiting up to 600 s" in line:
                break
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = "".join(seen) + rest
    assert proc.returncode == 130, err
    said = [ln for ln in err.splitlines() if ln.startswith("interrupted during the grace: still running: i-")]
    assert said, err
    said = said[0]
    assert f"`trainctl stop {job} --grace-seconds 0` ends them now" in said
    assert run_cli(["down", job], home, env=sb.env).returncode == 0
