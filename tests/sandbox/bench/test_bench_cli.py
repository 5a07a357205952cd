"""`trainctl bench` before it launches anything, through the CLI in a subprocess against the sandbox: the dry
run says what it would launch, for how long and its dollar bound; a bench over its cap refuses in one line."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import ROOT, clean_env, run_cli

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


def _bench(sandbox, home, *args, stdin=subprocess.DEVNULL) -> subprocess.CompletedProcess:
    """The CLI as a script or CI job meets it: no terminal on stdin."""
    return subprocess.run([sys.executable, "-m", "trainctl.cli", "bench", *args], cwd=ROOT, stdin=stdin,
                          env=clean_env(home, sandbox.env), capture_output=True, text=True, timeout=300)


def test_bench_asks_before_spending_and_without_a_terminal_refuses_in_one_line(sandbox, tmp_path):
    proc = _bench(sandbox, tmp_path, SPEC, "--top", "2", "--max-usd", "5")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "not benched: no terminal to ask" in lines[0] and "--yes" in lines[0]
    assert "for up to $" in lines[0] and "g5.xlarge:1:spot" in lines[0]   # the bound in dollars, and what
    assert sandbox.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []


def test_layouts_left_out_by_top_say_so(sandbox, tmp_path):
    doc = json.loads(run_cli(["-o", "json", "bench", SPEC, "--top", "1", "--max-usd", "5", "--dry-run"], tmp_path,
                             env=sandbox.env).stdout)
    assert len(doc["layouts"]) == 1
    assert doc["not_measured"] and all(s["why"] == "after the first 1 (--top 1)" for s in doc["not_measured"])


def test_the_launchs_checks_run_before_the_bench_asks_and_say_each_message_once(sandbox, tmp_path):
    """A data bucket the permissions boundary does not admit: the launch would refuse it, so the dry run and the
    bench refuse it first, once for both layouts, before asking or launching anything."""
    s3 = sandbox.client("s3")
    s3.create_bucket(Bucket="my-datasets")
    s3.put_object(Bucket="my-datasets", Key="shards/part-000.txt", Body=b"0")
    sandbox.client("iam").set_default_policy_version(  # the boundary as first created: no data bucket
        PolicyArn="arn:aws:iam::123456789012:policy/trainctl-boundary", VersionId="v1")
    spec = tmp_path / "bench-data.yaml"
    spec.write_text(Path(SPEC).read_text() + "data: {train: s3://my-datasets/shards/}\n")
    for extra in (("--dry-run",), ("--yes",)):
        proc = _bench(sandbox, tmp_path / "home", str(spec), "--top", "2", "--max-usd", "5", *extra)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert lines[0].count("does not let the job's role read bucket my-datasets") == 1, lines[0]
        assert "g5.xlarge:1:spot" in lines[0] and "g6.xlarge:1:spot" in lines[0] and "nothing launched" in lines[0]
    # doctor SPEC runs the launch's own checks too, and says the refusal once
    doctor = run_cli(["doctor", str(spec)], tmp_path / "home", env={**sandbox.env, "COLUMNS": "200"})
    assert doctor.returncode == 1
    text = " ".join(doctor.stdout.split())
    assert text.count("does not let the job's role read bucket my-datasets") == 1, doctor.stdout
    assert 'launch checks (sagemaker): the launch refuses it too: see "data boundary" above' in text, doctor.stdout
    assert sandbox.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []
    assert sandbox.client("iam").list_roles(PathPrefix="/trainctl/")["Roles"] == []


def test_at_a_terminal_the_bench_asks_for_its_bound_and_no_launches_nothing(sandbox, tmp_path):
    """`launch` asks unless --yes; `bench` spends too, so it asks the same way (issue 35)."""
    import os
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "trainctl.cli", "bench", SPEC, "--top", "2", "--max-usd", "5"],
                            cwd=ROOT, stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=clean_env(tmp_path, sandbox.env), text=True)
    os.close(follower)
    os.write(leader, b"n\n")
    _, err = proc.communicate(timeout=120)
    os.close(leader)
    assert proc.returncode == 1, err
    asked = " ".join(err.split())   # the answer's newline is the terminal's echo, not in stderr
    assert asked.startswith("Bench 2 layouts (") and "g5.xlarge:1:spot" in asked and "g6.xlarge:1:spot" in asked
    assert "for up to $" in asked and asked.endswith("[y/N]:trainctl: error: not benched: nothing launched"), err
    assert sandbox.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []
