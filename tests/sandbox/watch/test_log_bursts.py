"""A burst of log lines larger than what one poll reads (5 pages of 10,000 events, all inside the tailer's 5 s
look-back) is read whole: `logs` prints every line and `watch` finds the metric line that comes after it.
The lines are written into the job's CloudWatch log group in the sandbox, as a node's agent writes them."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.support.helpers import run_cli

BURST = 60_000          # more than MAX_LOG_PAGES x 10,000: the tailer must go on from CloudWatch's nextToken
METRIC = "trainctl step=7 loss=1.5 samples_per_s=42.0"


def _write_burst(sb, job: str) -> None:
    logs = sb.client("logs")
    group = f"/trainctl/{job}"
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="i-0burst")
    now = int(time.time() * 1000) - 60_000
    messages = [f"line {i}" for i in range(BURST)] + [METRIC]
    for first in range(0, len(messages), 10_000):  # PutLogEvents takes at most 10,000 events a call
        logs.put_log_events(logGroupName=group, logStreamName="i-0burst", logEvents=[
            {"timestamp": now + i * 1000 // len(messages), "message": m}
            for i, m in enumerate(messages[first:first + 10_000], start=first)])


def test_logs_prints_every_line_of_a_burst_larger_than_one_poll_reads(sandbox_env):
    sb = sandbox_env
    home = Path(os.environ["TRAINCTL_HOME"])
    _write_burst(sb, "burst-1")
    proc = run_cli(["logs", "burst-1", "--platform", "ec2"], home, env=sb.env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    printed = proc.stdout.splitlines()
    assert len(printed) == BURST + 1
    assert printed[-1].endswith(METRIC) and printed[BURST - 1].endswith(f"line {BURST - 1}")


def test_watch_finds_the_metric_line_after_a_burst(sandbox_env):
    sb = sandbox_env
    home = Path(os.environ["TRAINCTL_HOME"])
    _write_burst(sb, "burst-2")
    proc = run_cli(["--output", "json", "watch", "burst-2", "--once", "--platform", "ec2"], home, env=sb.env,
                   timeout=300)
    doc = json.loads(proc.stdout)
    assert doc["throughput_samples_per_s"] == 42.0 and doc["step"] == 7, proc.stderr
