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
    sagemaker = client_for("sagemaker", region)
    try:
        sagemaker.stop_training_job(TrainingJobName=job_id)
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) != "ValidationException":
            raise
        # StopTrainingJob refuses a job that already ended: that is the outcome the user asked for, not an error
        status = _ended_status(sagemaker, job_id)
        if status is None:
            raise TrainctlError(f"cannot stop {job_id}: {aws.error_summary(e)}") from None
        return {"job_id": job_id, "platform": PLATFORM, "region": region, "requested": None, "ended": status}
    return {"job_id": job_id, "platform": PLATFORM, "region": region, "requested": "StopTrainingJob"}


def _ended_status(sagemaker, job_id: str) -> str | None:
    """The job's status when it has ended (Completed, Failed, Stopped), else None."""
    try:
        status = sagemaker.describe_training_job(TrainingJobName=job_id)["TrainingJobStatus"]
    except Exception:  # noqa: BLE001
        return None
    return status if status in ("Completed", "Failed", "Stopped") else None
