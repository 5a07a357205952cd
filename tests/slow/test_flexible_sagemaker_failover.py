"""A flexible layout on SageMaker, which takes one instance type per job: `launch --failover` tries its types in
the plan's priority order, one job each, against the sandbox's SageMaker (the jobs really run)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.helpers import run_cli

SPEC = str(Path(__file__).parents[1] / "support" / "launch_specs" / "tiny-vit-sagemaker.yaml")
LAYOUT = "g5.xlarge|g5.2xlarge:1:on-demand"


def cli_json(sandbox, home: Path, *args: str) -> dict:
    proc = run_cli(["--output", "json", *args], home, env=sandbox.env, timeout=150)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.timeout(240)
def test_a_flexible_layout_on_sagemaker_fails_over_across_its_types(sm, tmp_path):
    option = cli_json(sm, tmp_path, "plan", SPEC, "--layout", LAYOUT)["options"][0]
    first, second = option["instance_types"]
    sm.admin.set_capacity(first, available=False)  # every AZ
    out = cli_json(sm, tmp_path, "launch", SPEC, "--yes", "--failover", "--poll-seconds", "0.2", "--layout", LAYOUT)
    refused, ran = out["attempts"]
    assert refused["layout"] == f"{first}:1:on-demand" and refused["outcome"].startswith("no capacity")
    assert ran["layout"] == f"{second}:1:on-demand" and ran["outcome"] == "running"
    job = sm.client("sagemaker").describe_training_job(TrainingJobName=ran["job_id"])
    assert job["ResourceConfig"]["InstanceType"] == f"ml.{second}"
    assert run_cli(["stop", ran["job_id"]], tmp_path, env=sm.env).returncode == 0
