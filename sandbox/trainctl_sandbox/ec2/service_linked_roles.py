"""The Spot service-linked role, as EC2 and IAM treat it (moto knows neither rule).

- EC2 needs AWSServiceRoleForEC2Spot before a Spot request made through the API (EC2 User Guide,
  "Service-linked role for Spot Instance requests"). Without it, and without the caller's right to create
  it, CreateFleet reports `AuthFailure.ServiceLinkedRoleCreationNotPermitted` for each Spot pool in its
  `Errors`, and RunInstances with Spot market options fails with it. The sandbox never creates the role
  on the caller's behalf: it cannot know the caller's permissions, and trainctl creates it explicitly.
- IAM's CreateServiceLinkedRole for spot.amazonaws.com makes exactly that role, under
  /aws-service-role/spot.amazonaws.com/ (moto would name it AWSServiceRoleForspot); a second call is
  refused with InvalidInput "Service role name ... has been taken", AWS's wording.

A fresh sandbox account has the role, as most real accounts do (the console and any earlier Spot launch
made it): the admin action `remove_spot_service_linked_role` takes it away, for a test of the first Spot
request of an account.
"""
from __future__ import annotations

import json

from trainctl_sandbox.server.context import SandboxContext
from trainctl_sandbox.server.protocol import AwsError

ROLE_NAME = "AWSServiceRoleForEC2Spot"
SERVICE = "spot.amazonaws.com"
PATH = f"/aws-service-role/{SERVICE}/"
MISSING_CODE = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"
MISSING_MESSAGE = "The provided credentials do not have permission to create the service-linked role for EC2 Spot Instances."
_patched = False
_denied: dict[str, bool] = {}   # account -> the caller may not create the role (switched by `remove`)


def _iam(account: str):
    from moto.iam.models import iam_backends

    return iam_backends[account]["global"]


def exists(account: str) -> bool:
    return any(r.name == ROLE_NAME for r in _iam(account).roles.values())


def missing_error() -> AwsError:
    return AwsError(MISSING_CODE, MISSING_MESSAGE, 403)


def require(account: str) -> None:
    """Raise EC2's error for a Spot request when the account has no Spot service-linked role."""
    if not exists(account):
        raise missing_error()


def _create(backend, account: str):
    trust = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": SERVICE}, "Action": "sts:AssumeRole"}]}
    return backend.create_role(role_name=ROLE_NAME, assume_role_policy_document=json.dumps(trust), path=PATH,
                               permissions_boundary=None, description="Default EC2 Spot Service Linked Role",
                               tags=[], max_session_duration="3600", linked_service=SERVICE)


def seed(ctx: SandboxContext) -> None:
    """The Spot service-linked role, as most accounts have it (the server calls this after its own seed)."""
    if not exists(ctx.account_id):
        _create(_iam(ctx.account_id), ctx.account_id)


def install(ctx: SandboxContext) -> None:
    """Make moto's CreateServiceLinkedRole answer for spot.amazonaws.com as IAM does."""
    global _patched
    if _patched:
        return
    from moto.iam.exceptions import InvalidInput
    from moto.iam.models import IAMBackend

    original = IAMBackend.create_service_linked_role

    def create_service_linked_role(self, service_name: str, description: str, suffix: str):
        if service_name != SERVICE:
            return original(self, service_name, description, suffix)
        if _denied.get(self.account_id):
            from moto.iam.exceptions import IAMException

            raise IAMException("AccessDenied", f"User: arn:aws:iam::{self.account_id}:user/sandbox is not "
                               "authorized to perform: iam:CreateServiceLinkedRole on resource: arn:aws:iam::"
                               f"{self.account_id}:role/aws-service-role/{SERVICE}/{ROLE_NAME}")
        if any(r.name == ROLE_NAME for r in self.roles.values()):
            raise InvalidInput(f"Service role name {ROLE_NAME} has been taken in this account, please try a "
                               "different suffix.")
        return _create(self, self.account_id)

    IAMBackend.create_service_linked_role = create_service_linked_role
    _patched = True


def remove(ctx: SandboxContext, payload: dict) -> dict:
    """Admin action: the account loses its Spot service-linked role (as in an account that never used Spot);
    {"creatable": false}: and the caller may not create it (CreateServiceLinkedRole answers AccessDenied)."""
    backend = _iam(ctx.account_id)
    if exists(ctx.account_id):
        backend.delete_role(ROLE_NAME)
    _denied[ctx.account_id] = not payload.get("creatable", True)
    return {"role": ROLE_NAME, "exists": False, "creatable": not _denied[ctx.account_id]}


def reset(ctx: SandboxContext) -> None:
    _denied.clear()


ADMIN_ACTIONS = {"remove_spot_service_linked_role": remove}
