"""A training job from before the sandbox restarted: its last description, as SageMaker keeps an ended job's
(DescribeTrainingJob and ListTrainingJobs answer for it; StopTrainingJob refuses it, as for any ended job).

A job still running when the sandbox stopped lost its processes with it: it is kept as Failed, with the reason
(`trainctl sandbox down` ended it), never forgotten, so that `trainctl ls` does not guess."""
from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any

from moto.sagemaker.models import FakeTrainingJob

ENDED = ("Completed", "Failed", "Stopped")
STOPPED_WITH_SANDBOX = "the sandbox stopped while the job ran (`trainctl sandbox down`): its processes ended with it"


class EndedTrainingJob(FakeTrainingJob):
    """FakeTrainingJob.__init__ is not called (it would store a fixed Completed status)."""

    def __init__(self, described: dict[str, Any], tags: list, account_id: str, region: str):
        self.training_job_name = described["TrainingJobName"]
        self.arn = described["TrainingJobArn"]
        self.account_id, self.region_name = account_id, region
        self.tags = list(tags)
        self.described = described

    @classmethod
    def frozen(cls, described: dict[str, Any], tags: list, account_id: str, region: str) -> "EndedTrainingJob":
        """The job as it ends with the sandbox: an ended one as it is, a running one Failed, with why."""
        d = copy.deepcopy(described)
        if d.get("TrainingJobStatus") not in ENDED:
            now = datetime.now(timezone.utc)
            d.update(TrainingJobStatus="Failed", SecondaryStatus="Failed", FailureReason=STOPPED_WITH_SANDBOX,
                     LastModifiedTime=now, TrainingEndTime=now)
            d.setdefault("SecondaryStatusTransitions", []).append(
                {"Status": "Failed", "StartTime": now, "EndTime": now, "StatusMessage": STOPPED_WITH_SANDBOX})
        return cls(d, tags, account_id, region)

    @property
    def training_job_status(self) -> str:
        return self.described["TrainingJobStatus"]

    @property
    def secondary_status(self) -> str:
        return self.described.get("SecondaryStatus")

    @property
    def creation_time(self):
        return self.described.get("CreationTime")

    @property
    def last_modified_time(self):
        return self.described.get("LastModifiedTime")

    @property
    def training_end_time(self):
        return self.described.get("TrainingEndTime")

    def describe(self) -> dict[str, Any]:
        return copy.deepcopy(self.described)

    @property
    def response_object(self) -> dict[str, Any]:  # type: ignore[override]
        return self.describe()

    def gen_response_object(self) -> dict[str, Any]:
        return {**self.describe(), "Tags": list(self.tags)}


def saved_as(obj):
    """The server's persist hook (server/persist.py): a running job is kept as its description."""
    if type(obj).__name__ != "SandboxTrainingJob":
        return None
    frozen = EndedTrainingJob.frozen(obj.describe(), obj.tags, obj.account_id, obj.region_name)
    return EndedTrainingJob, (frozen.described, frozen.tags, frozen.account_id, frozen.region_name)
