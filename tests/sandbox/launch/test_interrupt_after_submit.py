"""Ctrl-C after the submit (issue 36, partly fixed before): the account's record update that follows
CreateTrainingJob is slow (sandbox latency on GetObject, which trainctl calls first there), and the user presses
Ctrl-C while it is out. The launch names the job that now runs, and the account's record is left "InProgress", which
other machines read correctly, not "Submitting"."""
from __future__ import annotations

import json

import pytest

from tests.support.interrupts import SPEC, check_interrupted, count, interrupt_launch_at, unwrapped


@pytest.mark.timeout(240)
def test_ctrl_c_after_the_submit_names_the_running_job_and_leaves_its_record_readable(sm, tmp_path):
    before = count(sm, "CreateTrainingJob")
    proc = interrupt_launch_at(sm, tmp_path / "home", [SPEC, "--layout", "g5.xlarge:1:on-demand"], "GetObject")
    check_interrupted(proc)
    assert count(sm, "CreateTrainingJob") == before + 1  # the Ctrl-C came after the submit
    (job,) = [j["TrainingJobName"] for j in sm.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]]
    said = unwrapped(proc.stderr)
    assert f"interrupted after {job} was submitted: it runs; `trainctl watch {job}` follows it" in said, said
    record = json.loads(sm.client("s3").get_object(Bucket="trainctl-123456789012-us-east-1",
                                                   Key=f"{job}/job.json")["Body"].read())
    assert record["status"] == "InProgress", record["status"]
