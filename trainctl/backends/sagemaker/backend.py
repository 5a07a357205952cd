"""SageMaker training jobs through plain boto3: the backend. Each abstract method is a module of this folder:
`prepare` (what a launch asks for), `status` (describe, logs), `stopping` (stop), `cleanup` (down); `role` (each
job's own execution role), `distribution` (--distribution), `images` (the training image). See
/work/shared/reference/AWS-NOTES.md, "SageMaker training jobs through plain boto3"."""
from __future__ import annotations

from typing import Any, Callable

from trainctl.backends.base import Backend, Capabilities, JobView, LaunchRequest, LaunchSettings, LogLine
from trainctl.backends.options import SageMakerOptions
from trainctl.backends.sagemaker import cleanup as _cleanup
from trainctl.backends.sagemaker import status, stopping
from trainctl.backends.sagemaker.prepare import prepare


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
        return stopping.stop(self.client_for, job_id, region, grace_s, say)

    def cleanup(self, job_id: str, region: str) -> list[str]:
        return _cleanup.cleanup(self.client_for, job_id, region)

    def describe(self, job_id: str, region: str) -> JobView:
        return status.describe(self.client_for, job_id, region)

    def logs(self, job_id: str, region: str, cursor: dict | None) -> tuple[list[LogLine], dict]:
        return status.logs(self.client_for, job_id, region, cursor)
