"""The one interface every launch backend implements (sagemaker.py, ec2.py, local.py).

A launch is two steps so that what is shown is what runs:
- `prepare(...)` reads whatever it needs (account id, role, subnets, existing tagged resources) and returns
  a `LaunchRequest`: the complete, ordered list of AWS write calls with their exact boto3 parameters.
  It writes nothing. `trainctl launch --dry-run` prints it.
- `submit(request)` executes exactly those calls in order. A later call may use an earlier call's result
  through a `${name}` placeholder in its params (the earlier call declares `outputs={"name": "Json.Path"}`).

Everything a backend creates carries the tag `trainctl:job=<job id>`; `cleanup(job_id)` finds resources by
that tag (never by remembered ids), so it also works after a crash or a launch that failed halfway.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

JOB_TAG = "trainctl:job"
PLACEHOLDER = re.compile(r"\$\{([a-zA-Z0-9_]+)\}")


@dataclass(frozen=True)
class AwsCall:
    service: str                  # boto3 client name: "sagemaker", "ec2", "s3", "iam", "logs", ...
    operation: str                # API operation name, e.g. "CreateTrainingJob"
    params: dict[str, Any]        # exactly what is passed to boto3 (after ${placeholders} are filled in)
    region: str
    # name -> dotted path into the response (e.g. {"security_group_id": "GroupId"}) for later ${name} use
    outputs: dict[str, str] = field(default_factory=dict)
    # AWS error codes that mean "already done" (idempotent re-run), not failure
    ok_errors: tuple[str, ...] = ()
    why: str = ""                 # one line for people: what this call is for

    def method_name(self) -> str:
        return re.sub(r"(?<!^)(?=[A-Z])", "_", self.operation).lower()

    def to_json(self) -> dict:
        """As printed by --dry-run: bytes params (the code tarball) are summarised by size and sha256;
        the S3 key beside them names the blob."""
        return {"service": self.service, "operation": self.operation, "region": self.region,
                "params": _summarise(self.params), **({"why": self.why} if self.why else {})}


def _summarise(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"bytes": len(value), "sha256": hashlib.sha256(value).hexdigest()}
    if isinstance(value, dict):
        return {k: _summarise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_summarise(v) for v in value]
    return value


def fill_placeholders(value: Any, outputs: dict[str, Any]) -> Any:
    """Replace ${name} strings with values produced by earlier calls."""
    if isinstance(value, str):
        m = PLACEHOLDER.fullmatch(value)
        if m and m.group(1) in outputs:
            return outputs[m.group(1)]
        return PLACEHOLDER.sub(lambda mm: str(outputs.get(mm.group(1), mm.group(0))), value)
    if isinstance(value, dict):
        return {k: fill_placeholders(v, outputs) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_placeholders(v, outputs) for v in value]
    return value


@dataclass(frozen=True)
class LaunchRequest:
    platform: str                 # "sagemaker" | "ec2" | "local"
    job_id: str
    region: str
    option: dict                  # the plan option (JSON contract) this request launches
    calls: tuple[AwsCall, ...]
    notes: tuple[str, ...] = ()   # what prepare decided and why (AZ, subnet, image, role, ...)

    def to_json(self) -> dict:
        return {"platform": self.platform, "job_id": self.job_id, "option": self.option,
                "requests": [c.to_json() for c in self.calls], "notes": list(self.notes)}


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
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def finished(self) -> bool:
        return self.status in ("Completed", "Failed", "Stopped")


class CapacityError(Exception):
    """The layout could not get capacity (insufficient capacity, Spot wait exceeded): failover may move on."""


class Backend(Protocol):
    platform: str
    # True when a successful submit already holds the capacity (EC2 instant fleet); False when the platform
    # may still be waiting for instances after submit (SageMaker), so a --failover launch has to watch.
    capacity_at_submit: bool

    def prepare(self, option: dict, spec: Any, settings: "LaunchSettings") -> LaunchRequest:
        """Read what is needed, write nothing, return the exact calls a launch will make."""

    def submit(self, request: LaunchRequest, progress: Callable[[str], None] | None = None) -> dict:
        """Execute the request's calls in order; returns the outputs collected (ids, ARNs)."""

    def describe(self, job_id: str, region: str) -> JobView: ...

    def logs(self, job_id: str, region: str, cursor: dict | None) -> tuple[list[LogLine], dict]:
        """New log lines of every host since `cursor`, in time order, and the next cursor."""

    def stop(self, job_id: str, region: str) -> None: ...

    def cleanup(self, job_id: str, region: str) -> list[str]:
        """Delete everything tagged trainctl:job=<job_id>; safe to repeat; returns what was removed."""


@dataclass
class LaunchSettings:
    """What the user chose beyond the plan option (CLI flags and spec fields)."""

    job_id: str
    spec_path: str
    role: str | None = None           # SageMaker execution role name or ARN
    image: str | None = None          # training image override
    ami: str | None = None            # EC2 AMI override
    bucket: str | None = None         # job bucket override
    ssh_cidr: str | None = None       # EC2: allow SSH from this CIDR (never 0.0.0.0/0 by default)
    max_runtime_hours: float | None = None
    extra: dict = field(default_factory=dict)


def tags(job_id: str, **more: str) -> list[dict[str, str]]:
    return [{"Key": JOB_TAG, "Value": job_id}, *({"Key": k, "Value": v} for k, v in more.items())]


def self_only_security_group(job_id: str, name: str, vpc_id: str, region: str, job_tags: list[dict],
                             members: str = "nodes", existing_group: str | None = None) -> list[AwsCall]:
    """The calls that make a security group whose only rule admits all traffic from itself: the job's
    hosts reach each other (NCCL, EFA, rendezvous) and nothing else reaches them. A new group's id travels
    to later calls as ${security_group_id}; for an existing group (a re-run) only the rule is ensured."""
    group = existing_group or "${security_group_id}"
    calls = [] if existing_group else [
        AwsCall("ec2", "CreateSecurityGroup", {
            "GroupName": name, "VpcId": vpc_id,
            "Description": f"trainctl job {job_id}: {members} talk to each other only",
            "TagSpecifications": [{"ResourceType": "security-group", "Tags": job_tags}]},
            region, outputs={"security_group_id": "GroupId"}, why=f"a group for the job's {members}")]
    calls.append(AwsCall("ec2", "AuthorizeSecurityGroupIngress", {
        "GroupId": group, "IpPermissions": [{"IpProtocol": "-1", "UserIdGroupPairs": [
            {"GroupId": group, "Description": f"all traffic from the job's own {members}"}]}],
        "TagSpecifications": [{"ResourceType": "security-group-rule", "Tags": job_tags}]},
        region, ok_errors=("InvalidPermission.Duplicate",),
        why=f"all traffic between the job's {members}, none from anywhere else"))
    return calls


def run_calls(request: LaunchRequest, client_for: Callable[[str, str], Any],
              progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Execute a request's calls in order, filling ${placeholders}; shared by the backends' submit()."""
    outputs: dict[str, Any] = {}
    for call in request.calls:
        params = fill_placeholders(call.params, outputs)
        client = client_for(call.service, call.region)
        if progress:
            progress(f"{call.service}:{call.operation}" + (f" ({call.why})" if call.why else ""))
        try:
            resp = getattr(client, call.method_name())(**params)
        except Exception as e:  # noqa: BLE001 - only the declared "already done" codes are swallowed
            code = getattr(e, "response", {}).get("Error", {}).get("Code") if hasattr(e, "response") else None
            if code in call.ok_errors:
                continue
            raise
        for name, path in call.outputs.items():
            value: Any = resp
            for part in path.split("."):
                value = value[int(part)] if isinstance(value, list) else value[part]
            outputs[name] = value
    return outputs
