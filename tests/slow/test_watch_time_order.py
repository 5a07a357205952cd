"""`watch` prints status transitions and every host's log lines in one time order: a job that finished between
two polls (or before `watch` started) shows its last lines before "Completed", not after it. Through the CLI
against the sandbox, with a real (tiny) SageMaker job."""
from __future__ import annotations

import json
import re
from pathlib import Path

from tests.support.helpers import run_cli

SPEC = str(Path(__file__).parents[1] / "support" / "launch_specs" / "tiny-vit-sagemaker.yaml")


def test_transitions_and_log_lines_come_in_time_order(sm, tmp_path):
    launched = run_cli(["--output", "json", "launch", SPEC, "--yes"], tmp_path, env=sm.env, timeout=150)
    assert launched.returncode == 0, launched.stderr
    job = json.loads(launched.stdout)["job_id"]
    first = run_cli(["watch", job, "--interval", "0.3"], tmp_path, env=sm.env, timeout=200)
    assert first.returncode == 0, first.stderr
    # the job has ended: one poll reads every transition and every line, which must still come in time order
    again = run_cli(["watch", job], tmp_path, env=sm.env, timeout=120)
    assert again.returncode == 0, again.stderr
    stamped = [ln for ln in again.stdout.splitlines() if re.match(r"\d\d:\d\d:\d\d ", ln)]
    times = [ln[:8] for ln in stamped]
    assert times == sorted(times), "\n".join(stamped)
    completed = next(i for i, ln in enumerate(stamped) if ln[9:].startswith("Completed"))
    last_step = max(i for i, ln in enumerate(stamped) if "trainctl step=" in ln)
    assert last_step < completed, "\n".join(stamped)
