"""A SageMaker job's reads: its status, transitions and billed seconds (DescribeTrainingJob) and every host's
log lines (CloudWatch Logs, SageMaker's shared group)."""
from __future__ import annotations

import re
from typing import Any

from trainctl.aws import clients as aws
from trainctl.backends import logtail
from trainctl.backends.base import JobView, LogLine, Transition
from trainctl.errors import TrainctlError
from trainctl.naming.resources import SAGEMAKER_LOG_GROUP

NOT_FOUND = ("ValidationException", "ResourceNotFound")


def _newest_attempt_streams(streams: list[str]) -> int:
    """How many hosts logged in the newest attempt ({job}/algo-{n}-{epoch}: a restart has a new epoch)."""
    epochs = [int(m.group(1)) for m in (re.search(r"-(\d+)$", s) for s in streams) if m]
    return epochs.count(max(epochs)) if epochs else 0


def _host(stream: str) -> str:
    m = re.match(r".*/(algo-\d+)-\d+$", stream)
    return m.group(1) if m else stream.split("/")[-1]


def _ts(v: Any) -> Any:
    return v.timestamp() if hasattr(v, "timestamp") else v


def describe(client_for, job_id: str, region: str) -> JobView:
    try:
        d = client_for("sagemaker", region).describe_training_job(TrainingJobName=job_id)
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) in NOT_FOUND:
            raise TrainctlError(f"no SageMaker training job {job_id!r} in {region}") from None
        raise
    trans = tuple(Transition(t["Status"], _ts(t.get("StartTime")), _ts(t.get("EndTime")),
                             t.get("StatusMessage", "")) for t in d.get("SecondaryStatusTransitions", []))
    rc = d.get("ResourceConfig", {})
    count = rc.get("InstanceCount") or 1
    return JobView(
        job_id=job_id, platform="sagemaker", region=region, status=d["TrainingJobStatus"],
        secondary_status=d.get("SecondaryStatus"), transitions=trans,
        hosts=tuple(f"algo-{i}" for i in range(1, count + 1)),
        training_seconds=d.get("TrainingTimeInSeconds"), billable_seconds=d.get("BillableTimeInSeconds"),
        interruptions=sum(1 for t in trans if t.status == "Interrupted"),
        failure_reason=d.get("FailureReason"), instance_type=(rc.get("InstanceType") or "").removeprefix("ml.")
        or None, count=count, market="spot" if d.get("EnableManagedSpotTraining") else "on-demand",
        started_at=_ts(d.get("TrainingStartTime")), ended_at=_ts(d.get("TrainingEndTime")), raw=d)


def logs(client_for, job_id: str, region: str, cursor: dict | None) -> tuple[list[LogLine], dict]:
    """Every host's new lines: streams {job}/algo-{n}-{epoch} in SageMaker's shared log group."""
    source = logtail.LogSource(group=SAGEMAKER_LOG_GROUP, prefix=f"{job_id}/", host_of=_host,
                               live_streams=_newest_attempt_streams)
    return logtail.tail(client_for("logs", region), source, cursor)
