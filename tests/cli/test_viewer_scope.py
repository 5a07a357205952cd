"""The viewer role reads the jobs' records, status marks and measurements, not their code, checkpoints, data or
model: `trainctl iam-policy --role viewer` evaluated with AWS's policy logic (tests/support/policy_eval.py). Before,
its s3:GetObject covered every object of every trainctl bucket."""
from __future__ import annotations

import json

from tests.support.helpers import run_cli
from tests.support.policy_eval import Request, allowed

BUCKET = "trainctl-123456789012-us-east-1"
ACCOUNT = {"aws:PrincipalAccount": "123456789012", "s3:ResourceAccount": "123456789012"}


def test_the_viewer_reads_records_and_status_but_not_code_checkpoints_or_models(tmp_path):
    policy = json.loads(run_cli(["-o", "json", "iam-policy", "--role", "viewer"], tmp_path).stdout)["policy"]

    def reads(key: str) -> bool:
        return allowed(Request("s3:GetObject", f"arn:aws:s3:::{BUCKET}/{key}", dict(ACCOUNT)), [policy])

    for key in ("job-1/job.json", "job-1/status/completed", "trainctl/measurements/job-1.json"):
        assert reads(key), key
    for key in ("job-1/code/abc.tar.gz", "job-1/checkpoints/step-10/model.pt", "job-1/output/model.tar.gz",
                "trainctl/agent/abc.tar.gz"):
        assert not reads(key), key
