"""Launching the same spec while an earlier job of it still runs: --yes refuses (one line, nothing created)
unless --allow-duplicate; once the earlier job has ended, the launch goes ahead."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.helpers import CONFIGS, ROOT, clean_env, run_cli

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


def _count(sb, operation: str) -> int:
    return sum(c["count"] for c in sb.admin.call_log() if c["operation"] == operation)


def _racing_launches(sb, first_home: Path, second_home: Path) -> tuple[subprocess.CompletedProcess, tuple]:
    """The first launch is held inside CreateFleet (sandbox latency) when the second one starts: the second
    one's duplicate check runs while the first job is on its way but not yet visible on AWS."""
    before = _count(sb, "CreateFleet")
    # the first launch is held in CreateFleet until the second has run its checks (set_latency 0 releases it)
    sb.admin.set_latency("CreateFleet", 600_000)
    first = subprocess.Popen([sys.executable, "-m", "trainctl.cli", *LAUNCH], cwd=ROOT,
                             env=clean_env(first_home, sb.env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        while _count(sb, "CreateFleet") == before:  # the first launch passed every check and is starting its job
            assert first.poll() is None, first.communicate()
            time.sleep(0.02)
        second = run_cli(LAUNCH, second_home, env=sb.env)
        sb.admin.set_latency("CreateFleet", 0)
        out = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
        sb.admin.set_latency("CreateFleet", 0)
    return second, (first.returncode, *out)


def _live_fleet_jobs(sb) -> set[str]:
    return {t["Value"] for region in ("us-east-1", "us-west-2")
            for r in sb.client("ec2", region).describe_instances()["Reservations"] for i in r["Instances"]
            for t in i.get("Tags", []) if t["Key"] == "trainctl:job" and i["State"]["Name"] != "terminated"}


@pytest.mark.timeout(240)
def test_two_racing_launches_from_one_job_store_launch_once(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    second, (code, out, err) = _racing_launches(sb, home, home)
    assert code == 0, err
    assert second.returncode == 1 and "not launched:" in second.stderr and "another launch (pid" in second.stderr
    assert _live_fleet_jobs(sb) == {json.loads(out)["job_id"]}


@pytest.mark.timeout(240)
def test_two_racing_launches_from_two_machines_launch_once_through_the_marker_in_the_job_bucket(sandbox_env, tmp_path):
    sb = sandbox_env
    second, (code, out, err) = _racing_launches(sb, tmp_path / "laptop", tmp_path / "ci")  # no shared job store
    assert code == 0, err
    job = json.loads(out)["job_id"]
    assert second.returncode == 1, second.stderr
    assert f"not launched: an earlier job of spec vit-base-g5 still runs: {job} (being launched elsewhere" in \
        second.stderr
    assert _live_fleet_jobs(sb) == {job}
