"""What `doctor` asks of every backend: the pre-flight checks' result type and what they are given.

Each check reads only (no writes) and ends as pass, fail (with the fix) or skip (with the reason). The checks
every platform shares are in usecases/doctor/; a platform's own are its backend's `preflight_checks` (for
example backends/sagemaker/preflight.py, backends/ec2/preflight.py)."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class Check:
    name: str
    status: str            # "pass" | "fail" | "skip"
    detail: str
    fix: str = ""

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Preflight:
    """What a backend's pre-flight checks are given: the region, the spec (None: no spec given) with its plan
    (None: none made), the platforms the spec (or --platform) uses, and the launch flags doctor takes."""

    region: str
    platforms: tuple[str, ...]
    spec: Any = None
    spec_path: str | None = None
    plan: Any = None
    role: str | None = None
    subnet: str | None = None
    secrets: tuple[str, ...] = ()

    def first_option(self, platform: str):
        """The plan's first option on `platform`, or None."""
        return next((o for o in self.plan.options if o.platform == platform), None) if self.plan else None


def ok(name: str, detail: str) -> Check:
    return Check(name, "pass", detail)


def fail(name: str, detail: str, fix: str) -> Check:
    return Check(name, "fail", detail, fix)


def skip(name: str, detail: str) -> Check:
    return Check(name, "skip", detail)


def denied(e: Exception) -> bool:
    from trainctl.aws import clients as aws

    return aws.error_code(e) in ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation",
                                 "UnauthorizedAccess")


POLICY_FIX = "grant it: `trainctl iam-policy` prints the policy trainctl needs"


def ships_requirements(spec, spec_path: str | None) -> bool:
    """Whether the job's code archive has a requirements.txt (the container pip-installs it)."""
    if spec is None:
        return False
    from trainctl.backends.packaging import job_code

    return "requirements.txt" in job_code(spec, spec_path)[0].files
