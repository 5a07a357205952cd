"""SageMaker training jobs through plain boto3: the backend. Each abstract method is a module of this folder:
`prepare` (what a launch asks for), `status` (describe, logs), `stopping` (stop), `cleanup` (down); `role` (each
job's own execution role), `distribution` (--distribution), `images` (the training image). See
/work/shared/reference/AWS-NOTES.md, "SageMaker training jobs through plain boto3"."""
from __future__ import annotations

from typing import Any, Callable

from trainctl.backends.base import Backend, Capabilities, JobView, LaunchRequest, LaunchSettings, LogLine, RunningJob
from trainctl.backends.features import ArchivesModel, BuysCapacityBlocks, ChoosesDistribution, OneTypePerJob
from trainctl.backends.options import SageMakerOptions
from trainctl.backends.sagemaker import cleanup as _cleanup
from trainctl.backends.sagemaker import listing, preflight, status, stopping
from trainctl.backends.sagemaker.prepare import prepare


class SageMakerBackend(OneTypePerJob, ChoosesDistribution, ArchivesModel, BuysCapacityBlocks, Backend):
    """CreateTrainingJob takes one instance type (ResourceConfig.InstanceType): OneTypePerJob. Training plans are
    bought with CreateTrainingPlan and used through ResourceConfig.TrainingPlanArn: BuysCapacityBlocks."""

    platform = "sagemaker"
    title = "SageMaker"
    tagged_resource_type = "sagemaker:training-job"
    preflight_names = (preflight.ROLE_CHECK, preflight.ROUTE_CHECK)
    # CreateTrainingJob succeeds before SageMaker has instances: a --failover launch watches for capacity.
    # Managed Spot restarts interrupted jobs by itself: nothing for trainctl to recover.
    capabilities = Capabilities(capacity_at_submit=False, recover=False)
    options_type = SageMakerOptions
    reserved_kind = "SageMaker training plan"
    purchase_operation = "sagemaker:CreateTrainingPlan"
    # a job on a Scheduled plan stays Pending until the plan is Active, and ends with InsufficientCapacityError after
    # two days Pending (Developer Guide, "Training plans utilization for SageMaker training jobs"): an hour's margin
    queues_before_start_hours = 47.0

    @classmethod
    def reservations(cls):
        from trainctl.aws import training_plans

        return training_plans

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

    def running_jobs(self, region: str) -> list[RunningJob]:
        return listing.running_jobs(self.client_for, region)

    @classmethod
    def model_output(cls, bucket: str, job_id: str) -> str:
        return f"s3://{bucket}/{job_id}/output/{job_id}/output/"  # OutputDataConfig's S3OutputPath/JOB/output/

    def output_places(self, job_id: str, region: str) -> dict[str, str]:
        return listing.output_places(self.client_for("sagemaker", region), job_id)

    @classmethod
    def left_after_end(cls, view: JobView) -> str | None:
        """A job launched with its own execution role: the role (and the job's security group) stay until `down`,
        which deletes them once the job has ended."""
        role = str((view.raw or {}).get("RoleArn") or "")
        if "/trainctl/" not in role:
            return None
        return (f"{view.job_id} has ended; its execution role {role.rsplit('/', 1)[-1]} stays until "
                f"`trainctl down {view.job_id}` deletes it")

    @classmethod
    def distribution_kind(cls, options: Any, spec: Any) -> str:
        from trainctl.backends.sagemaker import distribution

        return distribution.chosen(getattr(options, "distribution", None), spec)

    def preflight_checks(self, ctx) -> list:
        return preflight.preflight_checks(self.client_for, ctx)
