"""Bounded retries with backoff (botocore standard mode, TRAINCTL_AWS_MAX_ATTEMPTS): a throttled `plan` and
`launch` succeed once the throttling stops, and end with a clear error when it does not.

Throttling is the sandbox's own switch (`admin.throttle(op, n)`: the next n calls get the error the real
service sends), so botocore's real retry logic runs in the CLI subprocess; the sandbox's call log
(every request with User-Agent trainctl/...) counts the attempts. Nothing is timed.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from tests.support.helpers import CONFIGS, run_cli

SPEC = str(Path(__file__).parents[2] / "support" / "launch_specs" / "tiny-vit-sagemaker.yaml")
ATTEMPTS = 3


def cli(sandbox, home: Path, *args: str):
    env = {**sandbox.env, "TRAINCTL_AWS_MAX_ATTEMPTS": str(ATTEMPTS), "TRAINCTL_CACHE_TTL": "0"}
    return run_cli(list(args), home, env=env, timeout=200)


class Calls:
    """Attempts of an operation since this object was made (the sandbox's call log is cumulative: the
    session-wide IAM policy check reads it at the end, so tests never clear it)."""

    def __init__(self, sandbox):
        self.sandbox = sandbox
        self.start = self._counts()

    def _counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.sandbox.admin.call_log():
            out[c["operation"]] = out.get(c["operation"], 0) + c["count"]
        return out

    def __call__(self, operation: str) -> int:
        return self._counts().get(operation, 0) - self.start.get(operation, 0)


def test_throttled_plan_succeeds_when_throttling_stops(sandbox, tmp_path):
    spec = str(CONFIGS / "vit-base-g5.yaml")
    calls = Calls(sandbox)
    base = cli(sandbox, tmp_path, "--output", "json", "plan", spec)
    assert base.returncode == 0, base.stderr
    baseline = calls("GetSpotPlacementScores")
    assert baseline > 0

    calls = Calls(sandbox)
    sandbox.admin.throttle("GetSpotPlacementScores", ATTEMPTS - 1)
    proc = cli(sandbox, tmp_path, "--output", "json", "plan", spec)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["source"] == "live" and {o["region"] for o in doc["options"]} == {"us-east-1", "us-west-2"}
    assert not any("failed" in w for w in doc["warnings"]), doc["warnings"]
    assert calls("GetSpotPlacementScores") == baseline + ATTEMPTS - 1  # the throttled attempts, retried
    def layouts(d):  # prices walk with the clock between the two runs; the layouts planned do not
        return {(o["platform"], o["instance_type"], o["count"], o["market"], o["region"]) for o in d["options"]}

    assert layouts(doc) == layouts(json.loads(base.stdout))


def test_plan_throttled_without_end_gives_up_after_bounded_attempts(sandbox, tmp_path):
    calls = Calls(sandbox)
    sandbox.admin.throttle("DescribeAvailabilityZones", 1000)
    proc = cli(sandbox, tmp_path, "--output", "json", "plan", str(CONFIGS / "vit-base-g5.yaml"))
    assert proc.returncode == 3, proc.stderr  # no option: every region's market data failed
    doc = json.loads(proc.stdout)
    assert doc["options"] == []
    for region in ("us-east-1", "us-west-2"):
        assert any(w.startswith(f"{region}: DescribeAvailabilityZones failed (RequestLimitExceeded")
                   for w in doc["warnings"]), doc["warnings"]
    assert calls("DescribeAvailabilityZones") == 2 * ATTEMPTS  # bounded: 2 regions x attempts


def test_throttled_launch_succeeds_when_throttling_stops(sm, tmp_path):
    calls = Calls(sm)
    sm.admin.throttle("CreateTrainingJob", ATTEMPTS - 1)
    sm.admin.throttle("CreateSecurityGroup", ATTEMPTS - 1)
    # two nodes: a job in the VPC, with its security group (one node runs outside any VPC)
    proc = cli(sm, tmp_path, "--output", "json", "launch", SPEC, "--yes", "--layout", "g5.xlarge:2:on-demand")
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)["job_id"]
    sagemaker = sm.client("sagemaker")
    assert sagemaker.describe_training_job(TrainingJobName=job)["TrainingJobName"] == job
    assert calls("CreateTrainingJob") == ATTEMPTS and calls("CreateSecurityGroup") == ATTEMPTS
    sagemaker.stop_training_job(TrainingJobName=job)


def test_launch_throttled_without_end_is_one_clear_error_and_leaves_nothing(sm, tmp_path):
    calls = Calls(sm)
    sm.admin.throttle("CreateTrainingJob", 1000)
    proc = cli(sm, tmp_path, "launch", SPEC, "--yes", "--layout", "g5.xlarge:1:on-demand")
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    m = re.fullmatch(r"trainctl: error: launch of (\S+) failed: ThrottlingException: Rate exceeded", last)
    assert m, proc.stderr
    assert "Traceback" not in proc.stderr
    job = m.group(1)
    assert calls("CreateTrainingJob") == ATTEMPTS
    assert sm.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []
    # the failed launch removed what it had created (the job's security group)
    groups = sm.client("ec2").describe_security_groups(Filters=[{"Name": "tag:trainctl:job", "Values": [job]}])
    assert groups["SecurityGroups"] == []
    ls = json.loads(cli(sm, tmp_path, "--output", "json", "ls", "--no-status").stdout)["jobs"]
    assert [(j["job_id"], j["recorded_status"]) for j in ls] == [(job, "SubmitFailed")]
