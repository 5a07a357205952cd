"""`trainctl bench` before it launches anything, through the CLI in a subprocess against the sandbox: the dry
run says what it would launch, for how long and its dollar bound; a bench over its cap refuses in one line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.helpers import run_cli

SPEC = str(Path(__file__).parents[2] / "support" / "launch_specs" / "bench-vit.yaml")


def test_dry_run_shows_layouts_runtime_and_bound_and_launches_nothing(sandbox, tmp_path):
    proc = run_cli(["-o", "json", "bench", SPEC, "--top", "2", "--max-usd", "5", "--max-minutes", "10",
                    "--dry-run"], tmp_path, env=sandbox.env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["dry_run"] is True
    assert sorted(r["layout"] for r in doc["layouts"]) == ["g5.xlarge:1:spot", "g6.xlarge:1:spot"]
    for row in doc["layouts"]:
        assert row["max_minutes"] == 10 and row["platform"] == "sagemaker"
        assert 0 < row["bound_usd"] < 5 and row["band"][0] < row["predicted_samples_per_s"] < row["band"][1]
    assert doc["bound_usd"] == pytest.approx(sum(r["bound_usd"] for r in doc["layouts"]), abs=1e-3)
    assert sandbox.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []


def test_bench_over_the_default_cap_refuses_before_launching(sandbox, tmp_path):
    # the whole vit_micro job costs cents: 5% of it cannot pay for a bench
    proc = run_cli(["bench", SPEC], tmp_path, env=sandbox.env)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "not benched" in lines[0] and "default cap" in lines[0] and "--max-usd" in lines[0]
    assert sandbox.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []


def test_named_layouts_over_the_cap_refuse(sandbox, tmp_path):
    proc = run_cli(["bench", SPEC, "--layout", "g5.xlarge:1:spot", "--max-usd", "0.01"], tmp_path, env=sandbox.env)
    assert proc.returncode == 2 and "--max-usd $0.01" in proc.stderr
    assert sandbox.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []


@pytest.mark.parametrize("columns", [80, 100, 200])
def test_dry_run_table_fits_the_terminal(sandbox, tmp_path, columns):
    proc = run_cli(["bench", SPEC, "--top", "2", "--max-usd", "5", "--dry-run"], tmp_path,
                   env={**sandbox.env, "COLUMNS": str(columns)})
    assert proc.returncode == 0, proc.stderr
    assert "g5.xlarge:1:spot" in proc.stdout and "dry run: nothing launched" in proc.stdout
    assert all(len(line) <= columns for line in proc.stdout.splitlines()), proc.stdout
