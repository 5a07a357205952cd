"""A SageMaker job on a training plan meets the plan's end: the bundled script reads the end SageMaker gives the
container (SAGEMAKER_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP), checkpoints and stops 40 minutes before it (SageMaker
terminates the plan's instances from 30 minutes before), and exits non-zero so that SageMaker does not report the
unfinished job Completed; then `launch --resume-from JOB` on the On-Demand option starts a new job from its
checkpoints. The sandbox sells the plan and brings its end near (`end_training_plan` with `in_seconds`)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.helpers import run_cli

TINY = Path(__file__).parents[1] / "support" / "launch_specs" / "tiny-vit-sagemaker.yaml"


def _cli(sb, home: Path, *args: str, ok: tuple[int, ...] = (0,)):
    proc = run_cli(list(args), home, env={**sb.env, "TRAINCTL_CACHE_TTL": "0"}, timeout=300)
    assert proc.returncode in ok, (args, proc.stdout[-2000:], proc.stderr[-3000:])
    return proc


@pytest.mark.timeout(600)
def test_a_job_on_a_training_plan_stops_before_its_end_and_resumes_on_demand(sm, tmp_path):
    spec = yaml.safe_load(TINY.read_text())
    spec["candidates"] = {"layouts": ["p4d.24xlarge:1"], "markets": ["on-demand"], "platforms": ["sagemaker"],
                          "regions": ["us-east-1"]}
    spec["workload"]["samples"] = 8 * 8 * 40   # 40 steps: the stop comes long before the end
    path, home = tmp_path / "spec.yaml", tmp_path / "home"
    path.write_text(yaml.safe_dump(spec))
    sm.admin.action("set_capacity_blocks", start_in_hours=[1])
    options = json.loads(_cli(sm, home, "-o", "json", "plan", str(path)).stdout)["options"]
    offer = next(o for o in options if o["market"] == "capacity-block")
    job = json.loads(_cli(sm, home, "-o", "json", "launch", str(path), "--option", str(offer["rank"]), "--yes",
                          "--buy-capacity-block").stdout)["job_id"]
    (plan,) = [p for ps in sm.admin.action("training_plans")["bought"].values() for p in ps]
    sm.admin.action("start_training_plan", plan=plan["TrainingPlanName"])
    # the plan ends in 39 minutes: the script's stop (40 minutes before the end) is due at once; SageMaker's
    # termination (30 minutes before) is 9 minutes away
    sm.admin.action("end_training_plan", plan=plan["TrainingPlanName"], in_seconds=39 * 60)
    watched = _cli(sm, home, "watch", job, "--interval", "0.3", ok=(1,))
    said = watched.stdout + watched.stderr
    assert "signal=capacity-end exit=3" in said and "before the training plan's end" in said, said[-3000:]
    stopped = int(said.split("stopped rank=0 step=")[1].split()[0])
    described = sm.client("sagemaker").describe_training_job(TrainingJobName=job)
    assert described["TrainingJobStatus"] == "Failed", described  # not Completed: its work is not done
    on_demand = next(o for o in json.loads(_cli(sm, home, "-o", "json", "plan", str(path)).stdout)["options"]
                     if o["market"] == "on-demand")
    proc = _cli(sm, home, "-o", "json", "launch", str(path), "--option", str(on_demand["rank"]), "--yes",
                "--resume-from", job)
    again = json.loads(proc.stdout)["job_id"]
    assert f"resuming from {job}" in " ".join(proc.stderr.split()), proc.stderr[-2000:]
    _cli(sm, home, "watch", again, "--interval", "0.3")
    resumed = _cli(sm, home, "logs", again).stdout
    assert f"trainctl resume step={stopped} " in resumed, (said[-4000:], resumed[:3000])
