"""SageMaker training jobs through plain boto3: the backend. What a launch asks for is built in
backends/sagemaker_request.py; here are the job's reads (describe, logs) and writes after the launch
(stop, cleanup). See /work/shared/reference/AWS-NOTES.md, "SageMaker training jobs through plain boto3"."""
from __future__ import annotations

import re
import time
from typing import Any, Callable

from trainctl import aws
from trainctl.awsinfra.naming import SAGEMAKER_LOG_GROUP
from trainctl.backends import logtail
from trainctl.backends import sagemaker_role as job_role
from trainctl.backends.base import JOB_TAG, Backend, Capabilities, JobView, LaunchRequest, LaunchSettings, LogLine, \
    Transition
from trainctl.backends.options import SageMakerOptions
from trainctl.backends.sagemaker_request import prepare, trusts_sagemaker
from trainctl.errors import TrainctlError, UsageError

__all__ = ["SageMakerBackend", "trusts_sagemaker"]
NOT_FOUND = ("ValidationException", "ResourceNotFound")
ENDED = ("Completed", "Failed", "Stopped")
ENDED_POLLS = 70  # about ten minutes: SageMaker gives a stopped job 120 s, then its uploads take their time


def _newest_attempt_streams(streams: list[str]) -> int:
    """How many hosts logged in the newest attempt ({job}/algo-{n}-{epoch}: a restart has a new epoch)."""
    epochs = [int(m.group(1)) for m in (re.search(r"-(\d+)$", s) for s in streams) if m]
    return epochs.count(max(epochs)) if epochs else 0


def _host(stream: str) -> str:
    m = re.match(r".*/(algo-\d+)-\d+$", stream)
    return m.group(1) if m else stream.split("/")[-1]


def _ts(v: Any) -> Any:
    return v.timestamp() if hasattr(v, "timestamp") else v


def _wait_ended(sm, job_id: str) -> None:
    """Until the job is Completed, Failed or Stopped (a stop takes as long as its last checkpoint upload)."""
    for attempt in range(ENDED_POLLS):
        if sm.describe_training_job(TrainingJobName=job_id)["TrainingJobStatus"] in ENDED:
            return
        time.sleep(min(10.0, 0.5 * 2 ** attempt))
    raise TrainctlError(f"{job_id} is still stopping after {ENDED_POLLS} checks: its execution role stays until it "
                        f"has ended; run `trainctl down {job_id}` again then")


class SageMakerBackend(Backend):
    platform = "sagemaker"
    # CreateTrainingJob succeeds before SageMaker has instances: a --failover launch watches for capacity.
    # Managed Spot restarts interrupted jobs by itself: nothing for trainctl to recover.
    capabilities = Capabilities(capacity_at_submit=False, recover=False)
    options_type = SageMakerOptions

    def prepare(self, option, spec: Any, settings: LaunchSettings) -> LaunchRequest:
        return prepare(self.client_for, option, spec, settings)

    def stop(self, job_id: str, region: str, grace_s: float | None = None,
             say: Callable[[str], None] | None = None) -> dict:
        """StopTrainingJob: SageMaker SIGTERMs the training and gives it 120 s before SIGKILL (the grace is
        SageMaker's own; none can be asked for)."""
        if grace_s is not None:
            raise UsageError(f"--grace-seconds applies to EC2 jobs; SageMaker gives {job_id} its own 120 s "
                             "between SIGTERM and SIGKILL: run `trainctl stop` without it")
        try:
            self.client_for("sagemaker", region).stop_training_job(TrainingJobName=job_id)
        except Exception as e:  # noqa: BLE001
            if aws.error_code(e) == "ValidationException":
                raise TrainctlError(f"cannot stop {job_id}: {aws.error_summary(e)}") from None
            raise
        return {"job_id": job_id, "platform": self.platform, "region": region, "requested": "StopTrainingJob"}

    def cleanup(self, job_id: str, region: str) -> list[str]:
        """Stop the job if it still runs, then delete the security groups tagged with it and, once the job has
        ended, its own execution role (the bucket is shared and code objects are shared by hash; checkpoints,
        model and logs are the job's output and stay)."""
        removed = []
        sm = self.client_for("sagemaker", region)
        try:
            found = sm.describe_training_job(TrainingJobName=job_id)
        except Exception as e:  # noqa: BLE001
            if aws.error_code(e) not in NOT_FOUND:
                raise
            found = {}  # never created (a launch that failed or was interrupted before CreateTrainingJob)
        # A job of this name that lacks the tag is someone else's (the launch refused to adopt it): left alone.
        ours = bool(found) and any(t["Key"] == JOB_TAG and t["Value"] == job_id for t in
                                   sm.list_tags(ResourceArn=found["TrainingJobArn"])["Tags"])
        if ours and found.get("TrainingJobStatus") == "InProgress":
            sm.stop_training_job(TrainingJobName=job_id)
            removed.append(f"training job {job_id} (it had reached SageMaker; stopping: it checkpoints, "
                           "uploads its model, then ends)")
        if ours and found.get("TrainingJobStatus") in ("InProgress", "Stopping"):
            # the container uploads its checkpoints and model with the execution role: it goes last
            _wait_ended(sm, job_id)
        ec2 = self.client_for("ec2", region)
        for g in ec2.describe_security_groups(Filters=[{"Name": f"tag:{JOB_TAG}", "Values": [job_id]}])[
                "SecurityGroups"]:
            try:
                ec2.delete_security_group(GroupId=g["GroupId"])
                removed.append(f"security group {g['GroupId']}")
            except Exception as e:  # noqa: BLE001
                if aws.error_code(e) == "DependencyViolation":  # the job's hosts still hold network interfaces
                    raise TrainctlError(f"security group {g['GroupId']} of {job_id} is still in use by the job's "
                                        f"hosts: run `trainctl down {job_id}` again once the job has ended") from None
                if aws.error_code(e) != "InvalidGroup.NotFound":
                    raise
        return removed + job_role.delete_role(self.client_for("iam", region), job_id)

    def describe(self, job_id: str, region: str) -> JobView:
        try:
            d = self.client_for("sagemaker", region).describe_training_job(TrainingJobName=job_id)
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

    def logs(self, job_id: str, region: str, cursor: dict | None) -> tuple[list[LogLine], dict]:
        """Every host's new lines: streams {job}/algo-{n}-{epoch} in SageMaker's shared log group."""
        source = logtail.LogSource(group=SAGEMAKER_LOG_GROUP, prefix=f"{job_id}/", host_of=_host,
                                   live_streams=_newest_attempt_streams)
        return logtail.tail(self.client_for("logs", region), source, cursor)
