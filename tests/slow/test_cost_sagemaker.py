"""`trainctl cost` of a SageMaker managed Spot job that ran to completion in the sandbox: running and billed
dollars are both the billable seconds x the instance count x the catalog's SageMaker On-Demand price (the Spot
discount is in the billable seconds), and the plan's prediction is the one stored at launch."""
from __future__ import annotations

import json
from pathlib import Path

from tests.support.cost_tags import activate_job_tag
from tests.support.helpers import run_cli
from trainctl.catalog import load_catalog

SPEC = str(Path(__file__).parents[1] / "support" / "launch_specs" / "tiny-vit-sagemaker.yaml")


def test_cost_of_a_completed_sagemaker_spot_job_is_its_billable_seconds_at_the_on_demand_price(sm, tmp_path):
    activate_job_tag(sm)
    launch = run_cli(["--output", "json", "launch", SPEC, "--yes"], tmp_path, env=sm.env)
    assert launch.returncode == 0, launch.stderr
    launched = json.loads(launch.stdout)
    job = launched["job_id"]
    watched = run_cli(["--output", "json", "watch", job, "--no-logs", "--interval", "0.3"], tmp_path, env=sm.env,
                      timeout=300)
    assert watched.returncode == 0, watched.stderr[-2000:]
    billable = json.loads(watched.stdout)["billable_seconds"]
    price = load_catalog().on_demand_price("sagemaker", "us-east-1", "g5.xlarge").usd_per_hour
    dollars = billable / 3600 * price * 2

    doc = json.loads(run_cli(["--output", "json", "cost", job], tmp_path, env=sm.env).stdout)
    (row,) = doc["jobs"]
    assert row["status"] == "Completed" and billable > 0
    assert row["running_usd"] == round(dollars, 4)            # as `watch` shows it
    assert row["billed_usd"] == round(dollars, 6)             # Cost Explorer, by the job's tag
    assert row["predicted_usd"] == launched["option"]["expected_cost_usd"]

    # stopping a job that already ended is what the user asked for: said, exit 0, nothing called a failure
    stopped = run_cli(["stop", job], tmp_path, env=sm.env)
    assert stopped.returncode == 0, stopped.stderr
    assert f"{job} already ended (Completed); nothing to stop" in " ".join(stopped.stderr.split() + stopped.stdout.split())
