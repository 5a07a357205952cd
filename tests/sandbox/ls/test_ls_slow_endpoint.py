"""`trainctl ls` with a slow endpoint: every job is asked about at once, each call with a short timeout, so
jobs AWS does not answer for in time show "unknown (...)" and the listing ends, instead of waiting out a
minute-long timeout per call and per job. Twenty EC2 jobs are in the store; the sandbox delays DescribeInstances
past trainctl's listing timeout; all twenty (a default listing) are asked at once: 8 workers took 61.6 s."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.helpers import ROOT, clean_env

JOBS = tuple(f"slow-job-{i}" for i in range(1, 21))  # a default listing's 20


@pytest.mark.timeout(240)
def test_ls_asks_about_every_job_at_once_with_a_short_timeout(sandbox_env):
    home = Path(os.environ["TRAINCTL_HOME"])
    endpoint = sandbox_env.env["AWS_ENDPOINT_URL"].rstrip("/").lower()
    from trainctl.state.job_store import JobStore

    with JobStore(home / "state.db", endpoint=endpoint) as store:
        store.add_event("probe", "probe", "creates the database")
    db = sqlite3.connect(home / "state.db")
    with db:
        for job in JOBS:
            db.execute("INSERT INTO jobs (endpoint, job_id, account, platform, region, status, created_at, "
                       "updated_at) VALUES (?, ?, '', 'ec2', 'us-east-1', 'InProgress', 1, 1)", (endpoint, job))
    db.close()
    # more than ls waits for one answer (10 s), less than two: 8 workers at a time never had 20 calls out at once
    sandbox_env.admin.set_latency("DescribeInstances", 11_000)
    most = 0
    try:
        proc = subprocess.Popen([sys.executable, "-m", "trainctl.cli", "--output", "json", "ls"], cwd=ROOT,
                                env=clean_env(home, sandbox_env.env), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        while proc.poll() is None and most < len(JOBS):  # every job asked at once, not 8 at a time
            most = max(most, sandbox_env.admin.calls_in_flight())
            time.sleep(0.05)
        out, err = proc.communicate(timeout=150)
        proc = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    finally:
        sandbox_env.admin.set_latency("DescribeInstances", 0)
    assert most >= len(JOBS), most
    assert proc.returncode == 0, proc.stderr
    listed = {j["job_id"]: j["status"] for j in json.loads(proc.stdout)["jobs"]}
    assert set(listed) == set(JOBS)
    assert all(status.startswith("unknown (") and "timeout" in status.lower() for status in listed.values()), listed
