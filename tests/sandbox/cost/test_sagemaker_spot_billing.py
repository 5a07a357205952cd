"""A SageMaker managed Spot job in the sandbox is billed as SageMaker bills it: its BillableTimeInSeconds carry
the Spot discount in force (the sandbox's own Spot price history), so `watch`'s savings (1 - billable/training)
and dollars (billable seconds at the On-Demand rate) are the plan's Spot price, not On-Demand's."""
from __future__ import annotations

import io
import json
import tarfile
import time
from datetime import datetime, timezone
from pathlib import Path

from tests.support.helpers import run_cli
from trainctl.catalog import load_catalog

TINY = Path(__file__).resolve().parents[3] / "sandbox" / "tests" / "sandbox_jobs" / "tiny" / "job.py"
BUCKET, REGION, JOB = "trainctl-billing-test", "us-east-1", "spot-billing"
ROLE = "arn:aws:iam::123456789012:role/trainctl-sagemaker-execution"


def _source(s3) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(TINY, arcname="job.py")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="code/sourcedir.tar.gz", Body=buf.getvalue())
    return f"s3://{BUCKET}/code/sourcedir.tar.gz"


def _spot_fraction_now(ec2) -> float:
    """The Spot price in force / On-Demand, in the AZ where a job outside a VPC runs (the cheapest now)."""
    now = datetime.now(timezone.utc)
    history = ec2.describe_spot_price_history(InstanceTypes=["g5.xlarge"], ProductDescriptions=["Linux/UNIX"],
                                              StartTime=now, EndTime=now)["SpotPriceHistory"]
    cheapest = min(float(p["SpotPrice"]) for p in history)
    return cheapest / load_catalog().on_demand_price("ec2", REGION, "g5.xlarge").usd_per_hour


def test_a_spot_job_is_billed_for_its_seconds_at_the_spot_discount_and_watch_shows_it(sandbox_env, tmp_path):
    sb = sandbox_env
    sb.admin.action("configure_training_jobs", time_scale=0.2)
    sm = sb.client("sagemaker")
    sm.create_training_job(
        TrainingJobName=JOB, RoleArn=ROLE,
        HyperParameters={"sagemaker_program": json.dumps("job.py"), "mode": "sleep",
                         "sagemaker_submit_directory": json.dumps(_source(sb.client("s3")))},
        AlgorithmSpecification={"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:"
                                                 "2.5.1-cpu-py311", "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": f"s3://{BUCKET}/output"},
        ResourceConfig={"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        EnableManagedSpotTraining=True, CheckpointConfig={"S3Uri": f"s3://{BUCKET}/checkpoints/{JOB}"},
        StoppingCondition={"MaxRuntimeInSeconds": 600, "MaxWaitTimeInSeconds": 1200})
    while sm.describe_training_job(TrainingJobName=JOB)["SecondaryStatus"] != "Training":
        time.sleep(0.2)
    time.sleep(6)  # how long it trains does not matter to the checks below, only that it is whole seconds
    sm.stop_training_job(TrainingJobName=JOB)
    while (d := sm.describe_training_job(TrainingJobName=JOB))["TrainingJobStatus"] not in ("Stopped", "Failed"):
        time.sleep(0.2)
    assert d["TrainingJobStatus"] == "Stopped", d.get("FailureReason")
    training, billable = d["TrainingTimeInSeconds"], d["BillableTimeInSeconds"]
    fraction = _spot_fraction_now(sb.client("ec2"))
    slack = 1.0 / training + 0.01  # both are whole seconds
    assert abs(billable / training - fraction) <= slack, (billable, training, fraction)

    doc = json.loads(run_cli(["--output", "json", "watch", JOB, "--platform", "sagemaker", "--once"],
                             tmp_path / "home", env=sb.env).stdout)
    assert abs(doc["spot_savings_pct"] - (1 - fraction) * 100) <= slack * 100
    sm_hourly = load_catalog().on_demand_price("sagemaker", REGION, "g5.xlarge").usd_per_hour
    plan_hourly = sm_hourly * fraction  # the plan's SageMaker Spot price: On-Demand x (1 - the EC2 Spot discount)
    assert abs(doc["cost_usd"] - training / 3600 * plan_hourly) <= sm_hourly / 3600 * (1 + 0.01 * training)
