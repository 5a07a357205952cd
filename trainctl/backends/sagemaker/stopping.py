"""`trainctl stop` of a SageMaker job: StopTrainingJob (SageMaker's own 120 s between SIGTERM and SIGKILL)."""
from __future__ import annotations

from typing import Callable

from trainctl.aws import clients as aws
from trainctl.errors import TrainctlError, UsageError

PLATFORM = "sagemaker"


def stop(client_for, job_id: str, region: str, grace_s: float | None = None,
         say: Callable[[str], None] | None = None) -> dict:
    """StopTrainingJob: SageMaker SIGTERMs the training and gives it 120 s before SIGKILL (the grace is
    SageMaker's own; none can be asked for)."""
    if grace_s is not None:
        raise UsageError(f"--grace-seconds applies to EC2 jobs; SageMaker gives {job_id} its own 120 s "
                         "between SIGTERM and SIGKILL: run `trainctl stop` without it")
    try:
        client_for("sagemaker", region).stop_training_job(TrainingJobName=job_id)
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) == "ValidationException":
            raise TrainctlError(f"cannot stop {job_id}: {aws.error_summary(e)}") from None
        raise
    return {"job_id": job_id, "platform": PLATFORM, "region": region, "requested": "StopTrainingJob"}
