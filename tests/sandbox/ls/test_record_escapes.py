"""Account records reach the terminal cleaned and read bounded (issue 36, item 10), through the CLI against the
sandbox: a colleague's record whose fields carry a window title, a screen clear and a bell prints none of them in
`ls --all` or `cost`, and an object of megabytes at a record's key is refused, not read whole."""
from __future__ import annotations

import json
import time

from tests.support.helpers import CONFIGS, run_cli

ME, REGION = "123456789012", "us-east-1"
BUCKET = f"trainctl-{ME}-{REGION}"
HOSTILE = "\x1b]0;owned\x07\x1b[2J\x1b[31mred"


def test_record_fields_print_without_escape_sequences_and_big_records_are_refused(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    from trainctl.state.documents import spec_sha256

    text, now = (CONFIGS / "vit-base-g5.yaml").read_text(), time.time()
    option = {"rank": 1, "platform": "ec2", "instance_type": "g5.xlarge", "count": 1, "market": "spot",
              "region": REGION, "accelerators": 1, "hourly_usd": 0.5, "throughput_samples_per_s": 10.0,
              "throughput_source": "model", "hours": 1.0, "expected_cost_usd": 0.5}
    record = {"format": 1, "job_id": "escapes-1", "platform": "ec2", "region": REGION, "account": ME,
              "spec_path": f"x{HOSTILE}.yaml", "spec_name": f"spec{HOSTILE}", "spec_text": text,
              "spec_sha256": spec_sha256(text), "model": "vit_base_patch16_224", "batch_size": 8, "option": option,
              "launched_by": f"arn:aws:iam::{ME}:user/{HOSTILE}", "launched_at": now, "status": f"Done{HOSTILE}",
              "updated_at": now}
    s3 = sb.client("s3", REGION)
    s3.put_object(Bucket=BUCKET, Key="escapes-1/job.json", Body=json.dumps(record))
    s3.put_object(Bucket=BUCKET, Key="huge-1/job.json",
                  Body=json.dumps({**record, "job_id": "huge-1", "spec_text": "#" * (2 << 20)}))

    listed = run_cli(["--region", REGION, "ls", "--all"], home, env=sb.env)
    assert listed.returncode == 0, listed.stderr
    assert "escapes-1" in listed.stdout
    for stream in (listed.stdout, listed.stderr):
        assert "\x1b" not in stream and "\x07" not in stream, stream
    assert "huge-1/job.json is over 1048576 bytes" in listed.stderr

    cost = run_cli(["--region", REGION, "cost"], home, env=sb.env)  # the record, cached by `ls --all`
    assert cost.returncode == 0, cost.stderr
    assert "escapes-1" in cost.stdout and "\x1b" not in cost.stdout and "\x07" not in cost.stdout, cost.stdout
