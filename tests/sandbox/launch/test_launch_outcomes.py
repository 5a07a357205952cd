"""What a launch that fails after it started says and records: a cleanup that did not finish names
`trainctl down JOB` and keeps the job listed as such; a database error once AWS accepted the job says first
that the job was submitted, then fails. Faults come from the sandbox (throttling) or a real lock on the
database held by the test."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.helpers import ROOT, clean_env, run_cli

SPEC = str(Path(__file__).parents[2] / "support" / "launch_specs" / "tiny-vit-sagemaker.yaml")
LAYOUT = ["--layout", "g5.xlarge:1:on-demand"]


@pytest.mark.timeout(180)
def test_a_failed_launch_whose_cleanup_failed_names_down_and_stays_listed(sm, tmp_path):
    home = tmp_path / "home"
    sm.admin.throttle("CreateTrainingJob", 1)      # the launch fails ...
    sm.admin.throttle("DescribeTrainingJob", 1)    # ... and so does the cleanup's first read
    proc = run_cli(["launch", SPEC, *LAYOUT, "--yes"], home, env={**sm.env, "TRAINCTL_AWS_MAX_ATTEMPTS": "1"})
    assert proc.returncode == 1, proc.stderr
    jobs = json.loads(run_cli(["-o", "json", "ls"], home, env=sm.env).stdout)["jobs"]
    assert len(jobs) == 1 and jobs[0]["recorded_status"] == "CleanupFailed"
    job = jobs[0]["job_id"]
    assert f"did not finish" in proc.stderr and f"`trainctl down {job}`" in proc.stderr
    assert f"`trainctl down {job}`" in jobs[0]["status"]


def _count(sandbox, operation: str) -> int:
    return sum(c["count"] for c in sandbox.admin.call_log() if c["operation"] == operation)


@pytest.mark.timeout(180)
def test_a_database_error_after_submit_says_the_job_was_submitted_then_fails(sm, tmp_path):
    home = tmp_path / "home"
    # a job too long to finish before `down` below: `down` must find it running and stop it (a finished job has
    # nothing to stop, and its `down` rightly names only the role)
    spec = tmp_path / "long-vit.yaml"
    spec.write_text(Path(SPEC).read_text().replace("samples: 192", "samples: 192000000"))
    before = _count(sm, "CreateTrainingJob")
    sm.admin.set_latency("CreateTrainingJob", 2000)  # time to take the database's lock while the call is out
    proc = subprocess.Popen([sys.executable, "-m", "trainctl.cli", "launch", str(spec), *LAYOUT, "--yes"], cwd=ROOT,
                            env=clean_env(home, sm.env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lock = None
    try:
        while _count(sm, "CreateTrainingJob") == before:  # the record is written, the call is on its way
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        lock = sqlite3.connect(home / "state.db", timeout=30)
        lock.execute("BEGIN EXCLUSIVE")  # another process holds the database (locked)
        out, err = proc.communicate(timeout=120)
    finally:
        if lock is not None:
            lock.rollback()
            lock.close()
        if proc.poll() is None:
            proc.kill()
        sm.admin.set_latency("CreateTrainingJob", 0)
    jobs = sm.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]
    assert len(jobs) == 1, err
    job = jobs[0]["TrainingJobName"]
    assert proc.returncode == 1, err
    lines = err.strip().splitlines()
    said = next(i for i, line in enumerate(lines) if line.startswith(f"submitted {job}; could not record it:"))
    # the progress line wraps at the terminal's width (80 without one): its continuation lines are indented
    said_end = next(i for i in range(said + 1, len(lines) + 1) if i == len(lines) or not lines[i].startswith(" "))
    assert "database is locked" in " ".join(line.strip() for line in lines[said:said_end])
    assert said_end < len(lines)
    assert lines[-1].startswith("trainctl: error: ") and "was submitted and runs" in lines[-1]
    lock = sqlite3.connect(home / "state.db", timeout=30)
    lock.execute("BEGIN IMMEDIATE")  # readers go on, writers wait and fail: `down` reads the job, cannot record
    try:
        down = run_cli(["down", job], home, env=sm.env)
    finally:
        lock.rollback()
        lock.close()
    assert f"removed training job {job}" in down.stdout, down.stderr
    assert down.returncode == 1 and "could not record it" in down.stderr and "database is locked" in down.stderr
