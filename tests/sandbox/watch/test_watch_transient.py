"""`watch` outlives AWS's passing refusals: a read throttled beyond botocore's retries is asked again with a
back-off, and the job is followed to its end; reads that keep failing end `watch` with its own exit code (5,
"could not follow"), never the job's "Failed" (1). The job is an EC2 job whose node (played by the test) left
its `completed` marker in the job bucket; the sandbox throttles the reads."""
from __future__ import annotations

import json
import os
from pathlib import Path

from tests.support.helpers import run_cli

JOB = "followed-1"
BUCKET = "trainctl-123456789012-us-east-1"


def _completed_job(sb) -> None:
    s3 = sb.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key=f"{JOB}/status/completed", Body=b"done")


def _watch(sb, *flags: str):
    env = {**sb.env, "TRAINCTL_AWS_MAX_ATTEMPTS": "1"}  # botocore gives up at once: trainctl's patience shows
    return run_cli(["--output", "json", "watch", JOB, "--platform", "ec2", "--interval", "0.05", *flags],
                   Path(os.environ["TRAINCTL_HOME"]), env=env)


def test_watch_follows_the_job_through_throttled_reads(sandbox_env):
    _completed_job(sandbox_env)
    for flags in ((), ("--once",)):
        sandbox_env.admin.throttle("DescribeInstances", 3)
        sandbox_env.admin.throttle("DescribeLogStreams", 2)
        proc = _watch(sandbox_env, *flags)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["status"] == "Completed"
        assert proc.stderr.count("asking again in") == 5, proc.stderr


def test_reads_that_keep_failing_end_watch_with_its_own_exit_code(sandbox_env):
    _completed_job(sandbox_env)
    sandbox_env.admin.throttle("DescribeInstances", 1000)
    proc = _watch(sandbox_env)
    assert proc.returncode == 5, proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("trainctl: error:")]
    assert f"trainctl could not follow {JOB} after 8 tries (RequestLimitExceeded" in line
    assert proc.stdout == ""
