"""Launching the same spec while an earlier job of it still runs: --yes refuses (one line, nothing created)
unless --allow-duplicate; once the earlier job has ended, the launch goes ahead."""
from __future__ import annotations

import json

from tests.support.helpers import CONFIGS, run_cli

SPEC = str(CONFIGS / "vit-base-g5.yaml")
LAUNCH = ["--output", "json", "launch", SPEC, "--platform", "ec2", "--layout", "g5.xlarge:1:spot", "--yes"]


def test_a_second_launch_of_a_running_spec_is_refused_under_yes_unless_allowed(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    first = run_cli(LAUNCH, home, env=sb.env)
    assert first.returncode == 0, first.stderr
    job = json.loads(first.stdout)["job_id"]
    region = json.loads(first.stdout)["region"]
    ec2 = sb.client("ec2", region)
    fleets_before = len(ec2.describe_fleets()["Fleets"])

    again = run_cli(LAUNCH, home, env=sb.env)
    assert again.returncode == 1 and again.stdout == ""
    (line,) = again.stderr.strip().splitlines()[-1:]
    assert f"not launched: an earlier job of spec vit-base-g5 still runs: {job} (InProgress/" in line
    assert "--allow-duplicate" in line and f"trainctl stop {job}" in line
    assert len(ec2.describe_fleets()["Fleets"]) == fleets_before  # nothing was created

    allowed = run_cli([*LAUNCH, "--allow-duplicate"], home, env=sb.env)
    assert allowed.returncode == 0, allowed.stderr
    second = json.loads(allowed.stdout)["job_id"]

    for j in (job, second):  # both ended: a third launch no longer counts them
        assert run_cli(["down", j], home, env=sb.env).returncode == 0
    third = run_cli(LAUNCH, home, env=sb.env)
    assert third.returncode == 0, third.stderr
    assert run_cli(["down", json.loads(third.stdout)["job_id"]], home, env=sb.env).returncode == 0


def test_at_a_terminal_the_second_launch_asks_first_and_no_launches_nothing(sandbox_env, tmp_path):
    import os
    import pty
    import subprocess
    import sys

    from tests.support.helpers import clean_env

    sb, home = sandbox_env, tmp_path / "home"
    first = run_cli(LAUNCH, home, env=sb.env)
    assert first.returncode == 0, first.stderr
    job = json.loads(first.stdout)["job_id"]
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "trainctl.cli", *LAUNCH[2:-1]], stdin=follower,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env(home, sb.env), text=True)
    os.close(follower)
    os.write(leader, b"n\n")
    out, err = proc.communicate(timeout=120)
    os.close(leader)
    assert proc.returncode == 1, err
    assert f"an earlier job of spec vit-base-g5 still runs: {job} (InProgress/" in err
    assert "Launch a second one anyway?" in err and "trainctl: error: not launched (" in err.strip().splitlines()[-1]
    ec2 = sb.client("ec2", json.loads(first.stdout)["region"])
    assert len(ec2.describe_fleets()["Fleets"]) == 1
    assert run_cli(["down", job], home, env=sb.env).returncode == 0
