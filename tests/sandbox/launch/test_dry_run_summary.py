"""`launch --dry-run` in table mode is a summary that fits the terminal: the option with its cost
and time, the settings that reach the job, one numbered line per AWS call (the same calls, in the same order,
as `-o json`) with its key parameters, and the alternatives. The full requests stay in `-o json`."""
from __future__ import annotations

import json
import re

import pytest

from tests.support.helpers import run_cli
from trainctl_sandbox.testing import add_nat

SPEC = """\
name: summary-fp32
entrypoint: {bundled: ddp, args: {model: vit_micro, device: cpu}}
model: {architecture: vit_micro, precision: fp32}
workload: {samples: 640, batch_size_per_accelerator: 8}
candidates: {layouts: ['g5.12xlarge:2:spot'], platforms: [sagemaker, ec2], regions: [us-east-1]}
constraints: {checkpoint_interval_minutes: 15}
"""


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(SPEC)
    return path


def _dry_run(sandbox, tmp_path, spec, platform: str, columns: int | None, *extra: str):
    proc = run_cli([*extra, "launch", str(spec), "--platform", platform, "--dry-run"], tmp_path / "home",
                   env={**sandbox.env, **({"COLUMNS": str(columns)} if columns else {})})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("platform", ["sagemaker", "ec2"])
def test_the_dry_run_summary_fits_and_names_every_call(sandbox, tmp_path, spec, platform):
    add_nat(sandbox)  # a SageMaker job of two nodes runs in the VPC: its code download and pip need a NAT
    doc = json.loads(_dry_run(sandbox, tmp_path, spec, platform, None, "-o", "json"))
    # the JSON contract: the exact requests, plus the settings that reach the job
    assert {"platform", "job_id", "option", "requests", "notes"} <= set(doc)
    settings = doc["job_settings"]
    assert (settings["precision"], settings["batch_size_per_accelerator"], settings["steps"],
            settings["checkpoint_interval_minutes"]) == ("fp32", 8, 10, 15)
    assert settings["args"]["bf16"] is False and settings["args"]["steps"] == 10
    operations = [f"{r['service']}:{r['operation']}" for r in doc["requests"]]

    for columns in (80, 100):
        text = _dry_run(sandbox, tmp_path, spec, platform, columns)
        lines = text.splitlines()
        # a line wider than the terminal is one word (a path, a key, an image): never cut inside it
        too_wide = [line for line in lines if len(line) > columns and " " in line.strip()]
        assert not too_wide, too_wide
        assert not text.lstrip().startswith("{") and '"params"' not in text  # a summary, not the JSON dump
        assert len(lines) < 80  # every call named once, the notes wrapped: a page, not the JSON's hundreds
        flat = " ".join(text.split())
        assert f"option: #{doc['option']['rank']} 2x g5.12xlarge spot on {platform}" in flat
        assert re.search(r"cost: \$[\d.,]+ expected over [\d.]+ h", flat)
        assert "fp32, batch 8 per accelerator, ddp, checkpoint every 15 min, 10 steps" in flat
        assert "--bf16 false" in flat and "--steps 10" in flat
        numbered = re.findall(r"^\s*(\d+)\. (\S+)", text, flags=re.M)
        assert [op for _, op in numbered] == operations
        assert [int(n) for n, _ in numbered] == list(range(1, len(operations) + 1))
        assert f"{len(operations)} AWS calls" in flat and "-o json prints the full requests" in flat
    if platform == "sagemaker":
        assert "InstanceType=ml.g5.12xlarge InstanceCount=2 EnableManagedSpotTraining=true" in flat
    else:
        assert flat.count("ec2:CreateFleet TotalTargetCapacity=2 DefaultTargetCapacityType=spot") >= 1
        assert "alternatives (fleet," in flat and "HttpTokens=required" in flat


def test_long_lists_of_names_are_abbreviated():
    from trainctl.render.dry_run import abbreviate_lists

    assert abbreviate_lists("code: a.py, b.py, c.py, d.py, e.py") == "code: a.py, b.py, c.py and 2 more"
    assert abbreviate_lists("AZ order: a (score 3), b (score 3)") == "AZ order: a (score 3), b (score 3)"
