"""SageMaker training plans bought and used, through the CLI against the sandbox, as EC2 Capacity Blocks are:
`--yes` alone buys nothing (the purchase needs --buy-capacity-block), `--dry-run` shows the CreateTrainingPlan
request; with the flag the plan is bought (its fee said first) and the training job names it
(ResourceConfig.TrainingPlanArn); SageMaker keeps the job Pending until the plan starts (`ls` and `watch` say
"waiting for the training plan"), the plan the account now holds is the plan's first option at no new cost, and
once the plan starts the job trains and completes on it; `down` says the plan stays (AWS cannot cancel one)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.helpers import run_cli

TINY = Path(__file__).parents[2] / "support" / "launch_specs" / "tiny-vit-sagemaker.yaml"


def _cli(sandbox, home: Path, *args: str, ok: tuple[int, ...] = (0,)):
    proc = run_cli(list(args), home, env={**sandbox.env, "TRAINCTL_CACHE_TTL": "0"}, timeout=200)
    assert proc.returncode in ok, (args, proc.stdout, proc.stderr)
    return proc


def _spec(tmp_path: Path) -> str:
    """The tiny ViT job on one ml.p4d.24xlarge On-Demand (a type AWS reserves as training plans)."""
    spec = yaml.safe_load(TINY.read_text())
    spec["candidates"] = {"layouts": ["p4d.24xlarge:1"], "markets": ["on-demand"], "platforms": ["sagemaker"],
                          "regions": ["us-east-1"]}
    path = tmp_path / "plan-spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def _plan_option(sandbox, home: Path, spec: str) -> dict:
    doc = json.loads(_cli(sandbox, home, "-o", "json", "plan", spec, "--top", "50").stdout)
    return next(o for o in doc["options"] if o["market"] == "capacity-block")


def _bought(sandbox) -> list[dict]:
    return [p for ps in sandbox.admin.action("training_plans")["bought"].values() for p in ps]


def test_yes_alone_buys_no_training_plan_and_dry_run_shows_the_purchase(sandbox, tmp_path):
    sandbox.admin.action("set_capacity_blocks", start_in_hours=[1])
    spec, home = _spec(tmp_path), tmp_path / "home"
    offer = _plan_option(sandbox, home, spec)
    assert offer["platform"] == "sagemaker" and offer["capacity_block"]["upfront_fee_usd"] > 0
    sandbox.admin.call_log(clear=True)
    refused = _cli(sandbox, home, "launch", spec, "--option", str(offer["rank"]), "--yes", ok=(2,))
    said = " ".join(refused.stderr.split())
    assert "nothing bought" in said and "SageMaker training plan" in said and "--buy-capacity-block" in said, said
    assert "cannot be undone" in said
    assert _bought(sandbox) == []
    assert not {c["operation"] for c in sandbox.admin.call_log()} & {"CreateTrainingJob", "CreateTrainingPlan",
                                                                       "CreateBucket", "CreateRole"}
    doc = json.loads(_cli(sandbox, home, "-o", "json", "launch", spec, "--option", str(offer["rank"]),
                          "--dry-run").stdout)
    purchase = doc["capacity_block_purchase"]
    assert purchase["operation"] == "sagemaker:CreateTrainingPlan"
    # (the launch plans again: an offer starting "in 1 h" may be another minute's offer, with its own id)
    assert purchase["params"]["TrainingPlanOfferingId"].startswith("tpo-") and purchase["upfront_fee_usd"] > 0
    assert {t["Key"] for t in purchase["params"]["Tags"]} == {"trainctl:job", "trainctl:spec"}
    (create,) = [r for r in doc["requests"] if r["operation"] == "CreateTrainingJob"]
    assert create["params"]["ResourceConfig"]["TrainingPlanArn"] == "${training_plan_arn}"
    assert "EnableManagedSpotTraining" not in create["params"] and create["params"]["CheckpointConfig"]["S3Uri"]
    assert _bought(sandbox) == []


@pytest.mark.timeout(300)
def test_a_bought_plan_queues_the_job_ranks_first_when_held_and_the_job_completes_on_it(sm, tmp_path):
    sm.admin.action("set_capacity_blocks", start_in_hours=[1])
    spec, home = _spec(tmp_path), tmp_path / "home"
    offer = _plan_option(sm, home, spec)
    launched = _cli(sm, home, "-o", "json", "launch", spec, "--option", str(offer["rank"]), "--yes",
                    "--buy-capacity-block")
    said = " ".join(launched.stderr.split())
    (plan,) = _bought(sm)
    job = json.loads(launched.stdout)["job_id"]
    assert said.index("cannot be undone") < said.index("bought SageMaker training plan"), said
    assert plan["Status"] == "Scheduled" and {t["Key"]: t["Value"] for t in plan["Tags"]}["trainctl:job"] == job
    described = sm.client("sagemaker").describe_training_job(TrainingJobName=job)
    assert described["ResourceConfig"]["TrainingPlanArn"] == plan["TrainingPlanArn"]
    # SageMaker queues the job until the plan is Active: ls and watch say what it waits for
    listed = json.loads(_cli(sm, home, "-o", "json", "ls").stdout)
    assert next(j for j in listed["jobs"] if j["job_id"] == job)["status"].startswith(
        "waiting for the training plan, starts"), listed
    assert "waiting for the training plan" in _cli(sm, home, "watch", job, "--once", ok=(0, 1, 3, 5)).stderr
    # the plan the account holds is now the first option, at no new cost
    first = json.loads(_cli(sm, home, "-o", "json", "plan", spec).stdout)["options"][0]
    assert first["capacity_block"]["reservation_id"] == plan["TrainingPlanArn"], first
    assert first["capacity_block"]["upfront_fee_usd"] == 0 and "already holds" in " ".join(first["why"])
    sm.admin.action("start_training_plan", plan=plan["TrainingPlanName"])
    _cli(sm, home, "watch", job, "--interval", "0.3")
    assert sm.client("sagemaker").describe_training_job(TrainingJobName=job)["TrainingJobStatus"] == "Completed"
    assert len(_bought(sm)) == 1
    down = _cli(sm, home, "down", job)
    assert f"training plan {plan['TrainingPlanName']} kept" in down.stdout + down.stderr
