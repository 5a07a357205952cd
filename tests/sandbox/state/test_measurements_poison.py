"""Measurements nobody can poison (issue 36, item 7), through the CLI against the sandbox.

A colleague may write `trainctl/measurements/JOB.json` in the account's bucket. A rate above what the layout can do
at its hardware's peak is quarantined (the model decides, the plan says why) until `calibration --accept JOB`; one
dated in the future is refused; and two completed jobs of one layout give the same plan every time."""
from __future__ import annotations

import json
import time

from tests.support.helpers import CONFIGS, run_cli

SPEC = str(CONFIGS / "vit-base-g5.yaml")
ME, REGION = "123456789012", "us-east-1"
BUCKET = f"trainctl-{ME}-{REGION}"
PLAN = ["--output", "json", "--region", REGION, "plan", SPEC, "--platform", "ec2", "--layout", "g5.xlarge:1:spot"]


def _measured(sb, job: str, rate: float, at: float) -> None:
    from trainctl.spec import load_spec

    spec = load_spec(SPEC)
    sb.client("s3", REGION).put_object(Bucket=BUCKET, Key=f"trainctl/measurements/{job}.json", Body=json.dumps(
        {"format": 1, "job_id": job, "account": ME, "model": spec.model.name,
         "batch_size": spec.workload.batch_size_per_accelerator, "instance_type": "g5.xlarge", "count": 1,
         "samples_per_s": rate, "measured_at": at}))


def _plan(sb, home) -> tuple[dict, list[str]]:
    out = run_cli(PLAN, home, env=sb.env)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    return doc["options"][0], list(doc.get("warnings", []))


def test_measurements_are_bounded_dated_and_chosen_deterministically(sandbox_env, tmp_path):
    sb, home, now = sandbox_env, tmp_path / "home", time.time()
    _measured(sb, "legit-a", 100.0, now - 200)
    _measured(sb, "legit-b", 130.0, now - 100)
    _measured(sb, "from-the-future", 90.0, 1e12)  # the year 33658
    planned = [_plan(sb, home) for _ in range(2)]  # the account's jobs of one layout: the newest, every time
    assert [(o["throughput_source"], o["throughput_samples_per_s"]) for o, _ in planned] == [("measured", 130.0)] * 2
    assert len({(o["hours"], o["expected_cost_usd"]) for o, _ in planned}) == 1
    assert any("from-the-future" in w and "dated in the future" in w for w in planned[0][1]), planned[0][1]

    _measured(sb, "tokens-as-samples", 5e8, now - 50)  # newer than legit-b, and impossible on one A10G
    option, _ = _plan(sb, home)
    assert option["throughput_source"] == "model" and option["throughput_samples_per_s"] < 1e4
    assert any("tokens-as-samples" in w and "quarantined" in w for w in option["why"]), option["why"]
    accepted = run_cli(["--region", REGION, "calibration", "--accept", "tokens-as-samples"], home, env=sb.env)
    assert accepted.returncode == 0, accepted.stderr
    option, _ = _plan(sb, home)
    assert option["throughput_source"] == "measured" and option["throughput_samples_per_s"] == 5e8
