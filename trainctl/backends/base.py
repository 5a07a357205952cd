"""The one interface every launch backend implements (backends/sagemaker/, backends/ec2/; a new one starts
from backends/template/, docs/adding-a-backend.md). No use case names a platform: what differs is asked here.

A launch is two steps so that what is shown is what runs:
- `prepare(option, spec, settings)` reads whatever it needs (account id, role, subnets, existing tagged
  resources) and returns a `LaunchRequest` (backends/calls.py): the complete, ordered list of AWS write
  calls with their exact boto3 parameters. It writes nothing. `trainctl launch --dry-run` prints it.
- `submit(request)`, implemented here once and final, executes exactly those calls.

What a backend can do is declared in its `capabilities`, never probed; what only some backends have is a
type (backends/features.py), so a backend that lacks it says so by not deriving from it. Its launch options are a typed
dataclass declared in backends/options.py (`options_type`), from which the CLI's flags are built.

Everything a backend creates carries the tag `trainctl:job=<job id>`; `cleanup(job_id)` finds resources by
that tag (never by remembered ids), so it also works after a crash or a launch that failed halfway.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, final

from trainctl.backends.calls import (AwsCall, Alternatives, CapacityError, Executor, LaunchRequest, SubmitTrace,
                                     Verdict, fill_placeholders)
from trainctl.catalog.platforms import PlatformFacts, facts as platform_facts
from trainctl.errors import UsageError
from trainctl.naming.tags import JOB_TAG

if TYPE_CHECKING:
    from trainctl.plans import Option

__all__ = ["JOB_TAG", "AwsCall", "Alternatives", "Backend", "Capabilities", "CapacityError", "JobView",
           "LaunchRequest", "LaunchSettings", "LogLine", "RunningJob", "SubmitTrace", "Transition", "Verdict",
           "fill_placeholders", "tags"]


@dataclass(frozen=True)
class LogLine:
    timestamp_ms: int
    host: str                     # "algo-1", "i-0abc...", ...
    message: str


@dataclass(frozen=True)
class Transition:
    status: str
    start: float | None           # epoch seconds
    end: float | None
    message: str = ""


@dataclass(frozen=True)
class JobView:
    """What `watch` shows of a job, the same for every platform."""

    job_id: str
    platform: str
    region: str
    status: str                   # InProgress | Completed | Failed | Stopping | Stopped (SageMaker's words)
    secondary_status: str | None
    transitions: tuple[Transition, ...]
    hosts: tuple[str, ...]
    training_seconds: int | None
    billable_seconds: int | None
    interruptions: int
    failure_reason: str | None
    instance_type: str | None = None
    count: int | None = None
    market: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    # What the same instance-hours would have cost On-Demand, where the platform bills instances (EC2): the
    # base of its Spot savings. None where the platform reports billable seconds (SageMaker).
    on_demand_usd: float | None = None
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def finished(self) -> bool:
        return self.status in ("Completed", "Failed", "Stopped")


@dataclass(frozen=True)
class RunningJob:
    """A job AWS holds under trainctl's tag, found from AWS alone (`ls --all`)."""

    job_id: str
    status: str                   # SageMaker's words, as JobView.status
    instance_type: str | None


@dataclass(frozen=True)
class Capabilities:
    # True when a successful submit already holds the capacity (EC2 instant fleet); False when the platform
    # may still be waiting for instances after submit (SageMaker), so a --failover launch has to watch.
    capacity_at_submit: bool
    # True when trainctl relaunches lost nodes itself (`watch --recover`); False when the platform does.
    recover: bool


@dataclass(frozen=True)
class LaunchSettings:
    """What the user chose beyond the plan option: the job id, the spec file and the backend's typed options
    (backends/options.py: SageMakerOptions or Ec2Options)."""

    job_id: str
    spec_path: str
    options: Any


def tags(job_id: str, **more: str) -> list[dict[str, str]]:
    return [{"Key": JOB_TAG, "Value": job_id}, *({"Key": k, "Value": v} for k, v in more.items())]


class Backend(abc.ABC):
    platform: ClassVar[str]               # the name flags, records and plan options use ("sagemaker")
    title: ClassVar[str]                  # the name messages use ("SageMaker")
    capabilities: ClassVar[Capabilities]
    options_type: ClassVar[type]
    # what its jobs run on, as the Resource Groups Tagging API's ResourceTypeFilters write it (`ls --all`)
    tagged_resource_type: ClassVar[str]
    # doctor's checks of this platform that need credentials: listed as skipped when they do not work
    preflight_names: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "submit" in cls.__dict__:  # what runs must be what prepare returned: one executor for all
            raise TypeError(f"{cls.__name__} must not override submit(); express the launch as calls")
        from trainctl.backends.features import RecoversLostNodes

        caps = cls.__dict__.get("capabilities")
        if caps is not None and caps.recover != issubclass(cls, RecoversLostNodes):  # one truth, two spellings
            raise TypeError(f"{cls.__name__}: capabilities.recover must say whether it is a RecoversLostNodes")

    @classmethod
    def facts(cls) -> PlatformFacts:
        """What the layers below backends/ know of this platform (the spec's name, the planner's overheads and
        Spot recovery): its folder's `platform.toml`, which catalog/platforms.py reads without importing any backend."""
        return platform_facts(cls.platform)

    def __init__(self, client_for: Callable[[str, str], Any] | None = None):
        from trainctl.aws import clients as aws

        self.client_for = client_for or (lambda service, region: aws.client(service, region))

    def options(self, given: dict[str, Any], context: str = "") -> Any:
        """This backend's typed options from the launch flags given; a flag of another platform is refused."""
        from trainctl.backends.options import resolve

        return resolve(self.platform, given, context)

    # ------------------------------------------------------------------ the launch
    @abc.abstractmethod
    def prepare(self, option: "Option", spec: Any, settings: LaunchSettings) -> LaunchRequest:
        """Read what is needed, write nothing, return the exact calls a launch will make."""

    @final
    def submit(self, request: LaunchRequest, progress: Callable[[str], None] | None = None,
               trace: SubmitTrace | None = None) -> dict:
        """Execute the request's calls as declared; returns the outputs collected (ids, ARNs). `trace` records
        each call sent and its outcome, for the caller to say what a failed or interrupted launch left."""
        say = progress or (lambda message: None)
        before = self.before_submit(request)
        trace = trace if trace is not None else SubmitTrace()
        try:
            return Executor(self.client_for, self.judge, self.compensate, say, trace).run(request)
        except BaseException as e:
            self.after_failed_submit(request, before, e, say, trace)
            refused = self.capacity_refusal(e) if isinstance(e, Exception) else None
            if refused:  # what the launch's --failover moves on from, the backend's cleanup done above
                raise CapacityError(refused) from e
            raise

    def capacity_refusal(self, error: Exception) -> str | None:
        """Why AWS had no capacity for the job-starting call, in words, when `error` says so (a refusal another
        option may not meet: --failover moves on), else None."""
        return None

    def before_submit(self, request: LaunchRequest) -> Any:
        """What the backend must know before the calls run to handle a failure well (read only)."""
        return None

    def after_failed_submit(self, request: LaunchRequest, before: Any, error: BaseException,
                            say: Callable[[str], None], trace: SubmitTrace | None = None) -> None:
        """Called when a call failed (or every alternative was rejected, or Ctrl-C came); the error is raised
        afterwards. `trace`: the calls sent and their outcomes (a job-starting call may be in flight)."""

    def judge(self, group: Alternatives, call: AwsCall, params: dict, response: Any, attempt: int) -> Verdict:
        """The acceptance check of the request's alternatives groups. A backend whose requests declare groups
        overrides it; reaching this one means a request names a group its backend does not judge."""
        raise TypeError(f"{self.platform} requests declare the alternatives group {group.name!r}, which "
                        f"{type(self).__name__} does not judge")

    def compensate(self, group: Alternatives, call: AwsCall, verdict: Verdict, say: Callable[[str], None]) -> None:
        """Give back what a rejected alternative got."""

    @classmethod
    def launch_units(cls, option: "Option", failover: bool, say: Callable[[str], None]) -> list["Option"]:
        """What one plan option launches as, in order: itself, unless the platform takes less per job
        (features.OneTypePerJob)."""
        return [option]

    def submit_error_hint(self, error: BaseException) -> str:
        """The fix to add to a failed launch's one line ("; do X"), or ''."""
        return ""

    # ------------------------------------------------------------------ after the launch
    @abc.abstractmethod
    def running_jobs(self, region: str) -> list[RunningJob]:
        """The jobs running in `region` under trainctl's tag, from AWS alone (`ls --all`)."""
    @abc.abstractmethod
    def describe(self, job_id: str, region: str) -> JobView: ...

    @abc.abstractmethod
    def logs(self, job_id: str, region: str, cursor: dict | None) -> tuple[list[LogLine], dict]:
        """New log lines of every host since `cursor`, in time order, and the next cursor."""

    @abc.abstractmethod
    def stop(self, job_id: str, region: str, grace_s: float | None = None,
             say: Callable[[str], None] | None = None) -> dict:
        """Stop a running job so that it checkpoints first; `grace_s`: how long its nodes get to do it before
        they are ended (None: the platform's default). Returns what was done, as one JSON document."""

    @abc.abstractmethod
    def cleanup(self, job_id: str, region: str) -> list[str]:
        """Delete everything tagged trainctl:job=<job_id>; safe to repeat; returns what was removed."""

    def recover(self, job_id: str, region: str, progress: Callable[[str], None] | None = None) -> dict:
        """Relaunch lost capacity; only backends whose capabilities say `recover` implement it."""
        raise UsageError(f"{self.platform} has no recovery by trainctl")

    @classmethod
    def left_after_end(cls, view: JobView) -> str | None:
        """One line naming what of an ended job trainctl launched stays until `trainctl down`, or None."""
        return None

    # ------------------------------------------------------------------ outputs
    @classmethod
    @abc.abstractmethod
    def model_output(cls, bucket: str, job_id: str) -> str:
        """The S3 URI under which the job's model lands in its job bucket (naming/bucket.py's layout)."""

    def output_places(self, job_id: str, region: str) -> dict[str, str]:
        """Outputs whose place the platform itself records for the job (what = S3 URI), over the layout's."""
        return {}

    # ------------------------------------------------------------------ doctor
    def preflight_checks(self, ctx) -> list:
        """This platform's read-only checks (backends/preflight.py: Check) before the job bucket's; each one
        skipped, with the reason, when the spec does not use the platform."""
        return []

    def late_preflight_checks(self, ctx) -> list:
        """This platform's checks after the bucket's and the data's (account-wide prerequisites)."""
        return []
