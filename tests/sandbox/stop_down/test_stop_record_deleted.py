"""`trainctl stop` of a job whose record another machine deletes (`trainctl rm`) between the stop's read of it and its
If-Match write: S3 answers that write 404 NoSuchKey (Amazon S3 User Guide, conditional writes), which is "no
record", as a record never written is, not a failure to report. The sandbox's `delete_before_write` switch is the
other machine. Through the CLI; before, the stop said the record "was not updated (NoSuchKey)"."""
from __future__ import annotations

import json

from tests.support.helpers import CONFIGS, run_cli

BUCKET = "trainctl-123456789012-us-east-1"


def test_a_stop_whose_record_is_deleted_meanwhile_stops_the_job_and_says_nothing_of_the_record(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    launched = run_cli(["-o", "json", "--region", "us-east-1", "launch", str(CONFIGS / "vit-base-g5.yaml"),
                        "--platform", "ec2", "--layout", "g5.xlarge:1:spot", "--yes"], home, env=sb.env)
    assert launched.returncode == 0, launched.stderr
    job = json.loads(launched.stdout)["job_id"]
    sb.admin.action("delete_before_write", bucket=BUCKET, key=f"{job}/job.json")
    stopped = run_cli(["stop", job, "--grace-seconds", "0"], home, env=sb.env)
    assert stopped.returncode == 0, stopped.stderr
    assert "record" not in stopped.stderr and "NoSuchKey" not in stopped.stderr, stopped.stderr
    assert sb.admin.action("info")["faults"]["deleted_before_write"] == []   # the write did meet the deletion
    assert "Contents" not in sb.client("s3").list_objects_v2(Bucket=BUCKET, Prefix=f"{job}/job.json")
