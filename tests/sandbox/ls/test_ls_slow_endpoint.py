"""`trainctl ls` with a slow endpoint: every job is asked about at once, each call with a short timeout, so
jobs AWS does not answer for in time show "unknown (...)" and the listing ends, instead of waiting out a
minute-long timeout per call and per job. Three EC2 jobs are in the store; the sandbox delays DescribeInstances
past trainctl's listing timeout."""
from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.support.helpers import run_cli

JOBS = ("slow-job-1", "slow-job-2", "slow-job-3")


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
    sandbox_env.admin.set_latency("DescribeInstances", 25_000)  # more than ls waits for one answer
    try:
        proc = run_cli(["--output", "json", "ls"], home, env=sandbox_env.env, timeout=150)
    finally:
        sandbox_env.admin.set_latency("DescribeInstances", 0)
    assert proc.returncode == 0, proc.stderr
    listed = {j["job_id"]: j["status"] for j in json.loads(proc.stdout)["jobs"]}
    assert set(listed) == set(JOBS)
    assert all(status.startswith("unknown (") and "timeout" in status.lower() for status in listed.values()), listed
