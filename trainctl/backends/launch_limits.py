"""What both backends' launches need alike: the job's maximum runtime, and the permissions boundary every
role trainctl creates carries (checked before a role is made)."""
from __future__ import annotations

from trainctl.aws import clients as aws
from trainctl.errors import TrainctlError
from trainctl.iam import BOUNDARY_POLICY
from trainctl.iam.boundary import boundary_arn
from trainctl.naming import resources as naming

MAX_SECONDS = 2419200  # SageMaker's limit on MaxRuntime and MaxWait (28 days); EC2 nodes stop at the same bound


def max_runtime_s(option, max_runtime_hours: float | None) -> int:
    if max_runtime_hours:
        seconds = int(max_runtime_hours * 3600)
    else:  # twice the expected billed hours and half an hour: room for a slow start, not for a hung job
        seconds = int((option.hours or 1.0) * 2 * 3600) + 1800
    return max(60, min(MAX_SECONDS, seconds))


def boundary(iam, account: str, region: str, notes: list[str], role: str = "node role") -> str:
    """The ARN of trainctl's permissions boundary, which every role trainctl creates carries; an
    administrator creates it once (the cli policy may not), so a missing one is an error with the fix."""
    arn = boundary_arn(account, naming.partition(region))
    try:
        iam.get_policy(PolicyArn=arn)
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) == "NoSuchEntity":
            raise TrainctlError(f"permissions boundary {arn} does not exist: an administrator creates it once with "
                                f"`trainctl iam-policy --role boundary > b.json && aws iam create-policy "
                                f"--policy-name {BOUNDARY_POLICY} --policy-document file://b.json` "
                                "(docs/security.md)") from None
        if aws.error_code(e) not in ("AccessDenied", "AccessDeniedException"):
            raise
    notes.append(f"{role} bounded by {arn}")
    return arn
