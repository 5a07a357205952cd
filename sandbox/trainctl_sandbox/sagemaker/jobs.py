"""SageMaker training jobs with a real lifecycle, patched into moto for the sandbox server.

moto 5.2.5 marks a training job Completed at once, drops `Environment`, overwrites a duplicate
name and has no StopTrainingJob. `install(ctx)` replaces, process-wide, moto's SageMaker response
handlers for CreateTrainingJob / DescribeTrainingJob / ListTrainingJobs and adds StopTrainingJob:
- CreateTrainingJob validates like AWS (ValidationException / ResourceInUse), stores the whole
  request in a `SandboxTrainingJob` (a moto FakeTrainingJob, so ListTags/AddTags/Search by ARN keep
  working) and starts a `JobRunner` thread (runner.py) that really runs the job.
- DescribeTrainingJob / ListTrainingJobs report the runner's live state.
- StopTrainingJob: SIGTERM to the job's processes, Stopping -> Stopped, the model still uploaded.

The server routes `POST /_trainctl/admin/<action>` to ADMIN_ACTIONS; every action takes
`{"name": <job>, ...}` ("job" is accepted too) and optionally "account_id"/"region" when a name
exists in several accounts or regions.
Admin errors: the server's AdminError with status 404 (no such job), ValueError (a bad request: 400).

Simulated waits are scaled by TRAINCTL_SANDBOX_TIME_SCALE (read at install) or the admin action
`configure_training_jobs`.

Choices where the sandbox must stand in for AWS (details in runner.py):
- No capacity (`ctx.faults`, per instance type and the AZs of VpcConfig's subnets): a Spot job
  waits in Starting ("Insufficient capacity error from EC2 while launching instances, retrying!")
  and ends Stopped/MaxWaitTimeExceeded at MaxWaitTimeInSeconds, or starts when capacity returns;
  an On-Demand job fails after a short retry with "CapacityError: ... InsufficientInstanceCapacity".
- /opt/ml is a folder per host and attempt, seen at /opt/ml by the host's processes (private_mounts.py); where
  that is not possible (not root) SM_* and /opt/ml values name the folder and `--checkpoint-dir` is appended.
- torchrun per host only with `sagemaker_torch_distributed_enabled: "true"` (as the PyTorch
  container does); otherwise one python process per host. requirements.txt is not installed:
  the server's own interpreter is the image.
- The execution role must exist and trust SageMaker (sagemaker_validation.check_role; `role_propagation_s`).
- In VPC mode the job has no internet (ec2/vpc_reach.py): without an S3 gateway endpoint or a NAT the code
  download times out, without a NAT a requirements.txt fails with InstallRequirementsError, and EFA hosts
  whose security group lets no traffic out to itself fail at their first collective.
"""
from __future__ import annotations

import copy
import os
import shutil
import threading
import uuid
from datetime import timezone
from pathlib import Path
from typing import Any, Callable

from moto.core.responses import ActionResult, EmptyResult
from moto.sagemaker.exceptions import ResourceInUseException, ResourceNotFound, ValidationError
from moto.sagemaker.models import FakeTrainingJob, sagemaker_backends
from moto.sagemaker.responses import SageMakerResponse

from trainctl_sandbox.market import cost_explorer
from trainctl_sandbox.sagemaker.billing import spot_rate, training_usage
from trainctl_sandbox.server.marked_processes import kill_marked, marked_pids
from trainctl_sandbox.sagemaker.runner import JobRunner
from trainctl_sandbox.sagemaker.ended import saved_as  # noqa: F401 (the server keeps a running job as its description)
from trainctl_sandbox.sagemaker.state import JobState, Settings
from trainctl_sandbox.sagemaker.training_plans import check_job as check_plan
from trainctl_sandbox.sagemaker.validation import DEFAULT_MAX_RUNTIME, check_role, constraint as _constraint, validate
from trainctl_sandbox.server.context import AdminError, SandboxContext

TIME_SCALE_ENV = "TRAINCTL_SANDBOX_TIME_SCALE"

_lock = threading.RLock()
_server_nonce = uuid.uuid4().hex[:12]  # marks this server process's jobs (several servers may share a machine)
_settings = Settings()  # process-wide like moto's backends; survives resets (a test sets what it needs)
_ctx: SandboxContext | None = None
STATE_KEY = "sagemaker_jobs"


def _jobs(ctx: SandboxContext | None = None) -> dict[tuple[str, str, str], "SandboxTrainingJob"]:
    """(account, region, name) -> job; kept in ctx.state, where the server keeps extension state."""
    ctx = ctx or _ctx
    return ctx.state.setdefault(STATE_KEY, {}) if ctx is not None else {}


# ----------------------------------------------------------------------------- the job object

class SandboxTrainingJob(FakeTrainingJob):
    """A training job whose status comes from its runner. Kept in moto's `training_jobs` dict.

    FakeTrainingJob.__init__ is not called: it stores a fixed Completed status and drops fields
    (Environment, RetryStrategy) that this job must return.
    """

    def __init__(self, account_id: str, region: str, request: dict[str, Any], ctx: SandboxContext,
                 registered: Callable[["SandboxTrainingJob"], bool], azs: list[str | None]):
        self.training_job_name = request["TrainingJobName"]
        self.account_id = account_id
        self.region_name = region
        self.arn = FakeTrainingJob.arn_formatter(self.training_job_name, account_id, region)
        self.tags = list(request.get("Tags") or [])
        self.request = request
        self.state = JobState(bool(request.get("EnableManagedSpotTraining")), spot_rate(ctx.seed, region, request, azs))
        self.marker = f"{_server_nonce}:{uuid.uuid4().hex[:12]}"
        self.runner = JobRunner(
            name=self.training_job_name, arn=self.arn, account_id=account_id, region=region,
            request=request, state=self.state, ctx=ctx, settings=_settings, marker=self.marker,
            registered=lambda: registered(self), availability_zones=azs)

    # moto's list/search code reads these attributes
    @property
    def training_job_status(self) -> str:
        return self.state.status

    @property
    def secondary_status(self) -> str:
        return self.state.secondary

    @property
    def creation_time(self):
        return self.state.creation_time

    @property
    def last_modified_time(self):
        return self.state.last_modified_time

    @property
    def training_end_time(self):
        return self.state.training_end_time

    def describe(self) -> dict[str, Any]:
        req = self.request
        st = self.state
        out_path = req["OutputDataConfig"]["S3OutputPath"].rstrip("/")
        stopping = dict(req.get("StoppingCondition") or {})
        stopping.setdefault("MaxRuntimeInSeconds", DEFAULT_MAX_RUNTIME)
        with st.lock:
            d: dict[str, Any] = {
                "TrainingJobName": self.training_job_name,
                "TrainingJobArn": self.arn,
                "ModelArtifacts": {"S3ModelArtifacts": f"{out_path}/{self.training_job_name}/output/model.tar.gz"},
                "TrainingJobStatus": st.status,
                "SecondaryStatus": st.secondary,
                "HyperParameters": dict(req.get("HyperParameters") or {}),
                "AlgorithmSpecification": copy.deepcopy(req.get("AlgorithmSpecification") or {}),
                "RoleArn": req["RoleArn"],
                "OutputDataConfig": copy.deepcopy(req["OutputDataConfig"]),
                "ResourceConfig": copy.deepcopy(req.get("ResourceConfig") or {}),
                "StoppingCondition": stopping,
                "CreationTime": st.creation_time,
                "LastModifiedTime": st.last_modified_time,
                "SecondaryStatusTransitions": copy.deepcopy(st.transitions),
                "EnableNetworkIsolation": bool(req.get("EnableNetworkIsolation", False)),
                "EnableInterContainerTrafficEncryption": bool(req.get("EnableInterContainerTrafficEncryption", False)),
                "EnableManagedSpotTraining": bool(req.get("EnableManagedSpotTraining", False)),
            }
            if st.failure_reason:
                d["FailureReason"] = st.failure_reason
            if st.training_start_time is not None:
                d["TrainingStartTime"] = st.training_start_time
            if st.training_end_time is not None:
                d["TrainingEndTime"] = st.training_end_time
            d.update(st.times())
        for key in ("InputDataConfig", "VpcConfig", "CheckpointConfig", "Environment", "RetryStrategy",
                    "DebugHookConfig", "DebugRuleConfigurations", "TensorBoardOutputConfig",
                    "ExperimentConfig", "ProfilerConfig", "ProfilerRuleConfigurations",
                    "RemoteDebugConfig", "InfraCheckConfig"):
            if req.get(key) is not None:
                d[key] = copy.deepcopy(req[key])
        return d

    @property
    def response_object(self) -> dict[str, Any]:  # type: ignore[override]
        return self.describe()

    def gen_response_object(self) -> dict[str, Any]:
        # Search returns a TrainingJob: the describe fields plus Tags
        return {**self.describe(), "Tags": list(self.tags)}


def _registered(job: SandboxTrainingJob) -> bool:
    """False once moto's reset dropped the job (the runner then stops touching AWS state)."""
    backend = sagemaker_backends[job.account_id][job.region_name]
    return backend.training_jobs.get(job.training_job_name) is job


# ----------------------------------------------------------------------------- moto handlers

def _create_training_job(self: SageMakerResponse) -> ActionResult:
    request = copy.deepcopy(dict(self.params))
    account_id, region = self.current_account, self.region
    azs = validate(request, account_id, region)
    check_plan(request, account_id, region)  # ResourceConfig.TrainingPlanArn: the plan's rules (training_plans.py)
    check_role(request, account_id, _settings.real("role_propagation_s"))
    backend = self.sagemaker_backend
    with _lock:
        name = request["TrainingJobName"]
        existing = backend.training_jobs.get(name)
        if existing is not None:
            raise ResourceInUseException(
                "Training job names must be unique within an AWS account and region, and a training job "
                f"with this name already exists ({existing.arn})")
        job = SandboxTrainingJob(account_id, region, request, _ctx, _registered, azs)
        backend.training_jobs[name] = job
        _jobs()[(account_id, region, name)] = job
        job.runner.start()
    return ActionResult({"TrainingJobArn": job.arn})


def _describe_training_job(self: SageMakerResponse) -> ActionResult:
    job = self.sagemaker_backend.training_jobs.get(self._get_param("TrainingJobName"))
    if job is None:
        raise ValidationError("Requested resource not found.")
    return ActionResult(job.response_object)


def _stop_training_job(self: SageMakerResponse) -> EmptyResult:
    job = self.sagemaker_backend.training_jobs.get(self._get_param("TrainingJobName"))
    if job is None:
        raise ResourceNotFound("Requested resource not found.")
    if not isinstance(job, SandboxTrainingJob) or job.state.status != "InProgress":
        # Stopping an already stopping job is accepted by AWS; anything ended is not
        if isinstance(job, SandboxTrainingJob) and job.state.status == "Stopping":
            return EmptyResult()
        raise ValidationError(f"The request was rejected because the training job is in status "
                              f"{job.training_job_status}.")
    job.runner.request_stop()
    return EmptyResult()


def _epoch(value: Any) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    if value.tzinfo is None:  # moto keeps naive UTC
        value = value.replace(tzinfo=timezone.utc)
    return value.timestamp()


def _list_training_jobs(self: SageMakerResponse) -> ActionResult:
    allowed_status = ["InProgress", "Completed", "Failed", "Stopping", "Stopped"]
    sort_by = self._get_param("SortBy", "CreationTime")
    sort_order = self._get_param("SortOrder", "Ascending")
    status = self._get_param("StatusEquals")
    max_results = self._get_param("MaxResults") or 10
    errors = []
    if sort_by not in ("Name", "CreationTime", "Status"):
        errors.append(_constraint(sort_by, "sortBy", "satisfy enum value set: [Name, CreationTime, Status]"))
    if sort_order not in ("Ascending", "Descending"):
        errors.append(_constraint(sort_order, "sortOrder", "satisfy enum value set: [Ascending, Descending]"))
    if status is not None and status not in allowed_status:
        errors.append(_constraint(status, "statusEquals", f"satisfy enum value set: [{', '.join(allowed_status)}]"))
    if not 1 <= int(max_results) <= 100:
        errors.append(_constraint(max_results, "maxResults", "have value less than or equal to 100"))
    if errors:
        raise ValidationError(f"{len(errors)} validation error{'s' if len(errors) > 1 else ''} detected: "
                              f"{'; '.join(errors)}")
    jobs = list(self.sagemaker_backend.training_jobs.values())
    name_contains = self._get_param("NameContains")
    if name_contains:
        jobs = [j for j in jobs if name_contains.lower() in j.training_job_name.lower()]
    if status:
        jobs = [j for j in jobs if j.training_job_status == status]
    for param, attr, keep in (("CreationTimeAfter", "creation_time", lambda a, b: a > b),
                              ("CreationTimeBefore", "creation_time", lambda a, b: a < b),
                              ("LastModifiedTimeAfter", "last_modified_time", lambda a, b: a > b),
                              ("LastModifiedTimeBefore", "last_modified_time", lambda a, b: a < b)):
        bound = self._get_param(param)
        if bound is not None:
            jobs = [j for j in jobs if keep(_epoch(getattr(j, attr)), _epoch(bound))]
    key = {"Name": lambda j: j.training_job_name, "Status": lambda j: j.training_job_status,
           "CreationTime": lambda j: _epoch(j.creation_time)}[sort_by]
    jobs.sort(key=key, reverse=sort_order == "Descending")
    start = 0
    token = self._get_param("NextToken")
    if token:
        try:
            start = int(token)
        except ValueError:
            raise ValidationError("Invalid pagination token.") from None
    page = jobs[start:start + int(max_results)]
    summaries = []
    for j in page:
        s = {"TrainingJobName": j.training_job_name, "TrainingJobArn": j.arn, "CreationTime": j.creation_time,
             "LastModifiedTime": j.last_modified_time, "TrainingJobStatus": j.training_job_status,
             "SecondaryStatus": getattr(j, "secondary_status", None)}
        if j.training_end_time is not None:
            s["TrainingEndTime"] = j.training_end_time
        summaries.append({k: v for k, v in s.items() if v is not None})
    result: dict[str, Any] = {"TrainingJobSummaries": summaries}
    if start + int(max_results) < len(jobs):
        result["NextToken"] = str(start + int(max_results))
    return ActionResult(result)


# ----------------------------------------------------------------------------- the contract

def install(ctx: SandboxContext) -> None:
    """Patch moto's SageMaker handlers (once per process); later calls only switch the context."""
    global _ctx
    with _lock:
        _ctx = ctx
        cost_explorer.bill("sagemaker", lambda c: training_usage(_jobs(c)))  # Cost Explorer bills the jobs
        scale = os.environ.get(TIME_SCALE_ENV)
        if scale:
            _settings.time_scale = float(scale)
        if getattr(SageMakerResponse, "_trainctl_training_jobs", False):
            return
        SageMakerResponse.create_training_job = _create_training_job
        SageMakerResponse.describe_training_job = _describe_training_job
        SageMakerResponse.list_training_jobs = _list_training_jobs
        SageMakerResponse.stop_training_job = _stop_training_job
        SageMakerResponse._trainctl_training_jobs = True


def _forget_all(ctx: SandboxContext) -> list[SandboxTrainingJob]:
    with _lock:
        registry = _jobs(ctx)
        jobs = list(registry.values())
        registry.clear()
    for job in jobs:
        backend = sagemaker_backends[job.account_id][job.region_name]
        if backend.training_jobs.get(job.training_job_name) is job:
            del backend.training_jobs[job.training_job_name]  # reset without moto's reset still forgets
        job.runner.abort()
    for job in jobs:
        job.runner.join(timeout=10)  # a runner that was launching a host kills it on its way out
    kill_marked(f"{_server_nonce}:")  # whatever is left from jobs this process started
    return jobs


def reset(ctx: SandboxContext) -> None:
    """Kill every job's processes, forget all jobs and their folders."""
    _forget_all(ctx)
    shutil.rmtree(Path(ctx.workdir) / "sagemaker", ignore_errors=True)


def shutdown(ctx: SandboxContext) -> None:
    """Kill every job's processes (the job folders stay for a post-mortem)."""
    _forget_all(ctx)


# ----------------------------------------------------------------------------- admin actions

def _not_found(message: str) -> Exception:
    return AdminError(message, 404)  # the server answers it with its status; a KeyError would be a 400


def _find(ctx: SandboxContext, payload: dict[str, Any]) -> SandboxTrainingJob:
    # "job" too: SandboxAdmin.action(name, **payload) cannot pass a payload key called "name"
    name = payload.get("name") or payload.get("job")
    if not name:
        raise ValueError("payload needs 'name' (or 'job'): the training job's name")
    with _lock:
        found = [j for (acct, reg, n), j in _jobs(ctx).items() if n == name
                 and payload.get("account_id", acct) == acct and payload.get("region", reg) == reg]
    if not found:
        raise _not_found(f"no sandbox training job named {name!r}")
    if len(found) > 1:
        raise ValueError(f"several training jobs are named {name!r}: give 'region' or 'account_id'")
    return found[0]


def interrupt_training_job(ctx: SandboxContext, payload: dict[str, Any]) -> dict[str, Any]:
    """Simulate a Spot interruption: now, `after_seconds` from now, or when a host logs step >= `at_step`."""
    job = _find(ctx, payload)
    if not job.state.spot:
        raise ValueError(f"{job.training_job_name} is not a managed Spot job (EnableManagedSpotTraining)")
    if job.state.status != "InProgress":
        raise ValueError(f"{job.training_job_name} is {job.state.status}: only InProgress jobs can be interrupted")
    after, at_step = payload.get("after_seconds"), payload.get("at_step")
    if after is not None and float(after) < 0:
        raise ValueError("after_seconds must be >= 0")
    return job.runner.request_interrupt(after, at_step)


def training_job_processes(ctx: SandboxContext, payload: dict[str, Any]) -> dict[str, Any]:
    """Live pids of a job's processes (torchrun and its ranks); without a name, of every job ever
    started by this server process, including forgotten ones (what a leak test wants)."""
    if payload.get("name") or payload.get("job"):
        job = _find(ctx, payload)
        return {"name": job.training_job_name, "pids": job.runner.pids()}
    return {"name": None, "pids": marked_pids(f"{_server_nonce}:")}


def configure_training_jobs(ctx: SandboxContext, payload: dict[str, Any]) -> dict[str, Any]:
    """Change the simulated durations: {"time_scale": 0.1} or any Settings field (sandbox seconds)."""
    with _lock:
        for key, value in payload.items():
            if not hasattr(_settings, key):
                raise ValueError(f"unknown setting {key!r}; known: {sorted(vars(_settings))}")
            if float(value) < 0:
                raise ValueError(f"{key} must be >= 0")
            setattr(_settings, key, float(value))
        return dict(vars(_settings))


def training_job_sandbox_info(ctx: SandboxContext, payload: dict[str, Any]) -> dict[str, Any]:
    """Where the job's host folders and local log copies are, attempts and interruptions so far."""
    return _find(ctx, payload).runner.info()


ADMIN_ACTIONS: dict[str, Callable[[SandboxContext, dict], dict]] = {
    "interrupt_training_job": interrupt_training_job,
    "training_job_processes": training_job_processes,
    "configure_training_jobs": configure_training_jobs,
    "training_job_sandbox_info": training_job_sandbox_info,
}

__all__ = ["install", "reset", "shutdown", "ADMIN_ACTIONS", "SandboxTrainingJob"]
