"""Bring your own script (docs/your-script.md): the example under examples/own-script plans, launches on the
sandbox, is watched to Completed with its progress from the metric line's total_steps, and its measured
throughput feeds the next plan; a script that prints no metric line gets a warning in `watch`."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.support.helpers import run_cli

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "own-script"


def _json(sb, home, *args) -> dict:
    proc = run_cli(["--output", "json", *args], home, env=sb.env, timeout=150)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_example_script_plans_launches_completes_and_feeds_the_next_plan(sm, tmp_path):
    home, spec = tmp_path / "home", str(EXAMPLE / "job.yaml")
    plan = _json(sm, home, "plan", spec)
    assert plan["options"][0]["throughput_source"] == "given"
    job = _json(sm, home, "launch", spec, "--yes")["job_id"]
    # --no-logs prints no log line, yet reads them: the progress and the measurement below come from them
    follow = run_cli(["watch", job, "--interval", "0.3", "--no-logs"], home, env=sm.env, timeout=150)
    assert follow.returncode == 0, follow.stderr
    assert "trainctl step=" not in follow.stdout and "warning: no metric line" not in follow.stderr
    assert "trainctl step=300 " in run_cli(["logs", job], home, env=sm.env, timeout=150).stdout
    # the job's own execution role outlives the job until `down`: watch's last line says so
    assert follow.stderr.strip().splitlines()[-1] == (f"{job} has ended; its execution role trainctl-{job} stays "
                                                      f"until `trainctl down {job}` deletes it")
    doc = _json(sm, home, "watch", job, "--once")
    assert doc["status"] == "Completed" and doc["warnings"] == []
    # the script's arguments do not say the step count: the metric line's total_steps does
    assert doc["step"] == 300 and doc["steps"] == 300 and doc["throughput_samples_per_s"] > 0
    again = _json(sm, home, "plan", spec)["options"][0]
    assert again["throughput_source"] == "measured"


def test_a_script_without_metric_lines_gets_a_warning_in_watch(sm, tmp_path):
    home, project = tmp_path / "home", tmp_path / "project"
    shutil.copytree(EXAMPLE, project)
    (project / "train.py").write_text("import sys\nprint('training without metric lines', sys.argv[1:])\n")
    job = _json(sm, home, "launch", str(project / "job.yaml"), "--yes")["job_id"]
    follow = run_cli(["watch", job, "--interval", "0.3"], home, env=sm.env, timeout=150)
    assert follow.returncode == 0, follow.stderr
    (warning,) = [ln for ln in follow.stderr.splitlines() if ln.startswith("warning: no metric line")]
    assert "trainctl step=N loss=X samples_per_s=Y [total_steps=M]" in warning and "docs/your-script.md" in warning
    assert _json(sm, home, "watch", job, "--once")["warnings"] == [warning.removeprefix("warning: ")]
