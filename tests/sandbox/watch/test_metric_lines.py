"""Metric lines a script gets wrong are skipped and counted, never fatal: `loss=tensor(2.3)` or a throughput
of infinity does not stop `watch` or `logs`, and never becomes a measurement. A measurement that is no
measurement (infinity stored by an older trainctl) is left out of plans, and `trainctl calibration --forget
JOB` removes it. The job is an EC2 job whose node (played by the test) logged the lines and left its
`completed` marker."""
from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

from tests.support.helpers import CONFIGS, run_cli

JOB = "metrics-1"
LINES = ["trainctl step=1 loss=tensor(2.3125) samples_per_s=10.0",
         "trainctl step=2 loss=2.0 samples_per_s=1e999",
         "trainctl step=3 loss=1.9 samples_per_s=12.5"]


def _job(sb) -> None:
    s3, logs = sb.client("s3"), sb.client("logs")
    s3.create_bucket(Bucket="trainctl-123456789012-us-east-1")
    s3.put_object(Bucket="trainctl-123456789012-us-east-1", Key=f"{JOB}/status/completed", Body=b"done")
    logs.create_log_group(logGroupName=f"/trainctl/{JOB}")
    logs.create_log_stream(logGroupName=f"/trainctl/{JOB}", logStreamName="i-0node")
    now = int(time.time() * 1000) - 10_000
    logs.put_log_events(logGroupName=f"/trainctl/{JOB}", logStreamName="i-0node",
                        logEvents=[{"timestamp": now + i, "message": m} for i, m in enumerate(LINES)])


def test_malformed_and_absurd_metric_lines_are_skipped_and_counted(sandbox_env):
    _job(sandbox_env)
    home = Path(os.environ["TRAINCTL_HOME"])
    for flags in (["--once"], ["--interval", "0.05"]):
        proc = run_cli(["--output", "json", "watch", JOB, "--platform", "ec2", *flags], home, env=sandbox_env.env)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        assert (doc["step"], doc["throughput_samples_per_s"], doc["malformed_metric_lines"]) == (3, 12.5, 2)
        assert "2 metric lines skipped" in proc.stderr
    logs = run_cli(["logs", JOB, "--platform", "ec2"], home, env=sandbox_env.env)
    assert logs.returncode == 0 and len(logs.stdout.splitlines()) == 3, logs.stderr


def test_a_stored_infinite_measurement_is_left_out_of_plans_and_can_be_forgotten(tmp_path):
    home, spec = tmp_path / "home", str(CONFIGS / "vit-base-g5.yaml")
    assert run_cli(["plan", spec, "--offline"], home).returncode == 0
    # the database as an older trainctl left it: a completed job whose measured rate was infinite
    from trainctl.state.job_store import JobStore

    with JobStore(home / "state.db", endpoint="") as store:
        store.add_event("old-job-1", "probe", "creates the database")
    db = sqlite3.connect(home / "state.db")
    with db:
        db.execute("INSERT INTO measured_throughput (endpoint, account, model, batch_size, instance_type, count, "
                   "samples_per_s, job_id, measured_at) VALUES ('', '', 'vit_base_patch16_224', 128, "
                   "'g5.2xlarge', 1, 9e999, 'old-job-1', 0)")
    db.close()
    plan = run_cli(["--output", "json", "plan", spec, "--offline"], home)
    assert plan.returncode == 0, plan.stderr
    assert all(o["throughput_source"] != "measured" for o in json.loads(plan.stdout)["options"])
    forget = run_cli(["calibration", "--forget", "old-job-1"], home)
    assert forget.returncode == 0 and "old-job-1: its measured throughput is forgotten" in forget.stderr
    again = run_cli(["calibration", "--forget", "old-job-1"], home)
    assert "no measured throughput recorded" in again.stderr
