"""The Spot service-linked role: EC2 needs AWSServiceRoleForEC2Spot in the account before the first Spot
request made through the API (EC2 User Guide, "Service-linked role for Spot Instance requests"). The console
creates it; CreateFleet and RunInstances create it only when the caller may (iam:CreateServiceLinkedRole),
else they fail with AuthFailure.ServiceLinkedRoleCreationNotPermitted.

`launch --platform ec2` with Spot reads whether it exists and, when not, creates it first (the policy of
`trainctl iam-policy` allows CreateServiceLinkedRole for spot.amazonaws.com only); `doctor` checks it.
SageMaker managed Spot needs none in the customer's account: SageMaker runs those instances itself.
"""
from __future__ import annotations

from trainctl.aws import clients as aws
from trainctl.backends.calls import AwsCall

ROLE_NAME = "AWSServiceRoleForEC2Spot"
SERVICE = "spot.amazonaws.com"
CREATE_COMMAND = f"aws iam create-service-linked-role --aws-service-name {SERVICE}"
# EC2's error code when the role is missing and the caller may not create it (CreateFleet Errors, RunInstances)
MISSING_CODE = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"
FIX = (f"create the Spot service-linked role once: `{CREATE_COMMAND}` (or grant iam:CreateServiceLinkedRole "
       f"for {SERVICE}: `trainctl iam-policy`)")


def exists(iam) -> bool | None:
    """True or False; None when these credentials may not read it (then a launch finds out at CreateFleet)."""
    try:
        iam.get_role(RoleName=ROLE_NAME)
    except Exception as e:  # noqa: BLE001
        code = aws.error_code(e)
        if code == "NoSuchEntity":
            return False
        if code in ("AccessDenied", "AccessDeniedException"):
            return None
        raise
    return True


def calls_if_missing(iam, region: str, market: str, notes: list[str]) -> list[AwsCall]:
    """The CreateServiceLinkedRole call a Spot launch needs first, or nothing (On-Demand, or the role exists)."""
    if market != "spot":
        return []
    found = exists(iam)
    if found:
        return []
    if found is None:
        notes.append(f"could not read the Spot service-linked role {ROLE_NAME} (no iam:GetRole on it); "
                     f"if the launch fails with {MISSING_CODE}: {FIX}")
        return []
    notes.append(f"this account has no {ROLE_NAME} yet, which EC2 needs before the first Spot request: "
                 "the launch creates it")
    # InvalidInput "Service role name ... has been taken": another launch made it in the meantime.
    return [AwsCall("iam", "CreateServiceLinkedRole", {"AWSServiceName": SERVICE}, region,
                    ok_errors=("InvalidInput",), why=f"{ROLE_NAME}, which EC2 needs before the first Spot request")]


def hint(e: BaseException) -> str:
    """The fix to add to a launch error caused by the missing role ('' for any other error)."""
    if getattr(e, "operation_name", None) == "CreateServiceLinkedRole" or MISSING_CODE in str(e):
        return f"; {FIX}"
    return ""
