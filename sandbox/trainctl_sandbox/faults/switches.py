"""Admin actions that turn the fault switches (context.FaultSwitches) on and off.

The switches themselves are applied elsewhere: throttling and latency to every call in the
middleware, capacity by launches (ec2/launch.py, ec2/fleet.py, and the SageMaker job lifecycle).
Operation names are plain ("RunInstances") or qualified by service ("ec2:RunInstances").
"""
from __future__ import annotations

from trainctl_sandbox.server.context import SandboxContext


def _require(payload: dict, *names: str) -> None:
    missing = [n for n in names if n not in payload]
    if missing:
        raise ValueError(f"missing field(s): {', '.join(missing)}")


def set_capacity(ctx: SandboxContext, payload: dict) -> dict:
    """{"instance_type", "az" (optional: every AZ), "available": false | true | N more instances}."""
    _require(payload, "instance_type")
    available = payload.get("available", False)
    if not isinstance(available, (bool, int)) or (not isinstance(available, bool) and available < 0):
        raise ValueError("available must be true, false or a number of instances >= 0")
    ctx.faults.set_capacity(payload["instance_type"], payload.get("az"), available)
    return {"faults": ctx.faults.snapshot()}


def throttle(ctx: SandboxContext, payload: dict) -> dict:
    """{"operation", "times"}: the next `times` calls of the operation are throttled."""
    _require(payload, "operation", "times")
    with ctx.faults.lock:
        ctx.faults.throttle[str(payload["operation"])] = int(payload["times"])
    return {"faults": ctx.faults.snapshot()}


def set_latency(ctx: SandboxContext, payload: dict) -> dict:
    """{"operation" (or "*" for every call), "ms"}: added to each call; 0 removes it."""
    _require(payload, "operation", "ms")
    ms = float(payload["ms"])
    if ms < 0:
        raise ValueError("ms must be >= 0")
    with ctx.faults.lock:
        if ms == 0:
            ctx.faults.latency_ms.pop(str(payload["operation"]), None)
        else:
            ctx.faults.latency_ms[str(payload["operation"])] = ms
    return {"faults": ctx.faults.snapshot()}


def delete_before_write(ctx: SandboxContext, payload: dict) -> dict:
    """{"bucket", "key"}: another writer deletes the object right before the next If-Match PutObject of it lands
    (`trainctl rm` on another machine between a read and its write); S3 then answers that write 404 NoSuchKey
    (Amazon S3 User Guide, conditional writes)."""
    _require(payload, "bucket", "key")
    with ctx.faults.lock:
        ctx.faults.deleted_before_write.add((str(payload["bucket"]), str(payload["key"])))
    return {"faults": ctx.faults.snapshot()}


def clear_faults(ctx: SandboxContext, payload: dict) -> dict:
    ctx.faults.clear()
    return {"faults": ctx.faults.snapshot()}


ADMIN_ACTIONS = {"set_capacity": set_capacity, "throttle": throttle, "set_latency": set_latency,
                 "clear_faults": clear_faults, "delete_before_write": delete_before_write}
