"""The errors an instant CreateFleet reports in `Errors` besides capacity, switched on per test.

EC2 reports per (launch template, override) pool why it launched nothing there (EC2 API reference,
`CreateFleetError`; the codes are EC2's error codes): not only InsufficientInstanceCapacity but a quota
(VcpuLimitExceeded, MaxSpotInstanceCountExceeded), a refused permission (UnauthorizedOperation), a bad
parameter (InvalidParameterValue), the missing Spot service-linked role
(AuthFailure.ServiceLinkedRoleCreationNotPermitted, service_linked_roles.py). The admin action
`set_fleet_error` {"code", "message" (AWS's wording by default), "instance_type", "az", "market"
(each optional: every pool)} makes the matching pools report that error; {"clear": true} removes them.
"""
from __future__ import annotations

from trainctl_sandbox.ec2 import service_linked_roles
from trainctl_sandbox.server.context import SandboxContext

# AWS's wording for the codes a test most often switches on (the EC2 API reference's error code list).
MESSAGES = {
    "VcpuLimitExceeded": ("You have requested more vCPU capacity than your current vCPU limit of 0 allows for the "
                          "instance bucket that the specified instance type belongs to. Please visit "
                          "http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit."),
    "MaxSpotInstanceCountExceeded": "Max spot instance count exceeded",
    "UnauthorizedOperation": "You are not authorized to perform this operation.",
    service_linked_roles.MISSING_CODE: service_linked_roles.MISSING_MESSAGE,
}


def _errors(ctx: SandboxContext) -> list[dict]:
    return ctx.state.setdefault(__name__, [])


def reset(ctx: SandboxContext) -> None:
    ctx.state.pop(__name__, None)


def set_fleet_error(ctx: SandboxContext, payload: dict) -> dict:
    if payload.get("clear"):
        reset(ctx)
        return {"fleet_errors": []}
    code = payload.get("code")
    if not code:
        raise ValueError("missing field: code (or clear: true)")
    message = payload.get("message") or MESSAGES.get(code)
    if not message:
        raise ValueError(f"no AWS wording known for {code!r}: give a message")
    if payload.get("market") not in (None, "spot", "on-demand"):
        raise ValueError("market must be spot or on-demand")
    _errors(ctx).append({"code": code, "message": message, **{k: payload[k] for k in ("instance_type", "az", "market")
                                                              if payload.get(k)}})
    return {"fleet_errors": list(_errors(ctx))}


def error_for(ctx: SandboxContext, account: str, instance_type: str, az: str, market: str) -> tuple[str, str] | None:
    """(code, message) that this pool reports instead of launching, or None."""
    if market == "spot" and not service_linked_roles.exists(account):
        return service_linked_roles.MISSING_CODE, service_linked_roles.MISSING_MESSAGE
    for e in _errors(ctx):
        if all(e.get(k) in (None, v) for k, v in (("instance_type", instance_type), ("az", az), ("market", market))):
            return e["code"], e["message"]
    return None


ADMIN_ACTIONS = {"set_fleet_error": set_fleet_error}
