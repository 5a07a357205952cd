"""Ctrl-C under latency (issue 36, item 15): `ls` asks AWS about its jobs from a pool of workers; pressed while
those calls are out, the CLI ended only once every worker had waited out its call (19 to 29 s). It now ends at once:
the sandbox still holds the calls when the process is gone (an event, not a timing)."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.helpers import ROOT, clean_env

LATENCY_MS = 8_000  # within ls's own timeout for one answer (10 s): the old exit waited for it


def _calls(sb, operation: str) -> int:
    return sum(c["count"] for c in sb.admin.call_log() if c["operation"] == operation)


@pytest.mark.timeout(240)
def test_ctrl_c_during_ls_ends_before_the_calls_it_gave_up_on(sandbox_env):
    home = Path(os.environ["TRAINCTL_HOME"])
    endpoint = sandbox_env.env["AWS_ENDPOINT_URL"].rstrip("/").lower()
    from trainctl.state.job_store import JobStore

    with JobStore(home / "state.db", endpoint=endpoint) as store:
        store.add_event("probe", "probe", "creates the database")
    with sqlite3.connect(home / "state.db") as db:
        for job in ("slow-1", "slow-2"):
            db.execute("INSERT INTO jobs (endpoint, job_id, account, platform, region, status, created_at, "
                       "updated_at) VALUES (?, ?, '', 'ec2', 'us-east-1', 'InProgress', 1, 1)", (endpoint, job))
    db.close()
    before = _calls(sandbox_env, "DescribeInstances")
    sandbox_env.admin.set_latency("DescribeInstances", LATENCY_MS)
    proc = subprocess.Popen([sys.executable, "-m", "trainctl.cli", "ls"], cwd=ROOT,
                            env=clean_env(home, sandbox_env.env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        while _calls(sandbox_env, "DescribeInstances") == before:  # the workers' calls are out
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        still_out = sandbox_env.admin.calls_in_flight()
    finally:
        if proc.poll() is None:
            proc.kill()
        sandbox_env.admin.set_latency("DescribeInstances", 0)
    assert proc.returncode == 130 and err.strip().splitlines()[-1] == "trainctl: interrupted", err
    assert still_out > 0  # gone while the calls it gave up on were still out
    while sandbox_env.admin.calls_in_flight() > 0:
        time.sleep(0.05)
