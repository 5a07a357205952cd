"""What SageMaker itself says of its jobs beyond one job's status: the training jobs in progress under trainctl's
tag (`ls --all`), and where a job's outputs are (`fetch`: DescribeTrainingJob names its S3 paths)."""
from __future__ import annotations

from typing import Any, Callable

from trainctl.backends.base import RunningJob
from trainctl.naming.tags import JOB_TAG


def running_jobs(client_for: Callable[[str, str], Any], region: str) -> list[RunningJob]:
    sm = client_for("sagemaker", region)
    found: list[RunningJob] = []
    for s in sm.list_training_jobs(StatusEquals="InProgress", MaxResults=100)["TrainingJobSummaries"]:
        tags = sm.list_tags(ResourceArn=s["TrainingJobArn"])["Tags"]
        if any(t["Key"] == JOB_TAG and t["Value"] == s["TrainingJobName"] for t in tags):
            found.append(RunningJob(s["TrainingJobName"], s["TrainingJobStatus"], None))
    return found


def output_places(sm, job_id: str) -> dict[str, str]:
    """The model (ModelArtifacts, else OutputDataConfig's path), TensorBoard events and checkpoints."""
    job = sm.describe_training_job(TrainingJobName=job_id)
    out = {"model": (job.get("ModelArtifacts") or {}).get("S3ModelArtifacts") or
           f"{job['OutputDataConfig']['S3OutputPath'].rstrip('/')}/{job_id}/output/model.tar.gz"}
    if job.get("TensorBoardOutputConfig"):
        out["tensorboard"] = job["TensorBoardOutputConfig"]["S3OutputPath"]
    if job.get("CheckpointConfig"):
        out["checkpoints"] = job["CheckpointConfig"]["S3Uri"]
    return out
