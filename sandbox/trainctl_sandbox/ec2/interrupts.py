"""EC2 instances ending the ways AWS ends them without their owner's API call, which moto has no way to do:
a Spot reclaim, and the instance's own operating system shutting it down.

- Spot reclaim (admin `reclaim_spot_instances`, `trainctl sandbox interrupt JOB` for an EC2 job): EC2 first
  posts the interruption notice, the instance metadata item spot/instance-action {"action": "terminate",
  "time": ...} and the EventBridge "EC2 Spot Instance Interruption Warning", two minutes before it acts
  (EC2 User Guide, "Spot Instance interruption notices"); then the instance is terminated with the StateReason
  code Server.SpotInstanceTermination (EC2 API Reference, StateReason). The sandbox runs no agent on its
  instances and has no instance metadata service, so the notice is kept here and read with the admin action
  `spot_instance_action` (what IMDS would answer; 404 when there is none, as IMDS). The reclaim follows
  `after_seconds` later (AWS: 120; 0, the default here, reclaims at once).
- Instance-initiated shutdown (admin `shutdown_instance`: what `shutdown -h` in the instance does, the node
  agent's last act): the instance's InstanceInitiatedShutdownBehavior decides, terminate or stop (EC2 User
  Guide, "Change the instance initiated shutdown behavior"); StateReason Client.InstanceInitiatedShutdown.
"""
from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any

from trainctl_sandbox.server.context import SandboxContext

JOB_TAG = "trainctl:job"
SPOT_CODE, SHUTDOWN_CODE = "Server.SpotInstanceTermination", "Client.InstanceInitiatedShutdown"

_lock = threading.Lock()
_notices: dict[str, dict[str, str]] = {}     # instance id -> spot/instance-action
_timers: list[threading.Timer] = []


def _not_found(message: str) -> Exception:
    from trainctl_sandbox.server.middleware import AdminError

    return AdminError(message, 404)


def _backends(ctx: SandboxContext, payload: dict) -> list[Any]:
    from moto.ec2.models import ec2_backends

    account = payload.get("account_id") or ctx.account_id
    regions = [payload["region"]] if payload.get("region") else list(ctx.regions)
    return [ec2_backends[account][region] for region in regions]


def _instance(ctx: SandboxContext, payload: dict) -> Any:
    wanted = payload.get("instance_id")
    if not wanted:
        raise ValueError("payload needs 'instance_id'")
    for backend in _backends(ctx, payload):
        found = [i for i in backend.all_instances() if i.id == wanted]
        if found:
            return found[0]
    raise _not_found(f"no sandbox instance {wanted!r}")


def _ended(instance: Any, code: str, message: str) -> None:
    from moto.ec2.models.instances import StateReason

    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    instance.state_reason = StateReason(f"{code}: {message}", code)
    # The time in StateTransitionReason is what tells when the instance ended (trainctl's dollars read it).
    instance._reason = f"Service initiated ({now} GMT)" if code.startswith("Server.") else \
        f"User initiated ({now} GMT)"


def _reclaim(instance: Any) -> None:
    with _lock:
        if instance._state.name not in ("pending", "running"):
            return  # ended meanwhile (by its owner, or its own shutdown): nothing left to reclaim
        instance.terminate()
        _ended(instance, SPOT_CODE, "Spot instance termination")


def reclaim_spot_instances(ctx: SandboxContext, payload: dict[str, Any]) -> dict[str, Any]:
    """Reclaim `count` (1) running Spot instances of the trainctl job `job` (or the `instance_ids` given):
    the notice now, the termination `after_seconds` (0) from now."""
    job = payload.get("job") or payload.get("name")
    if not job:
        raise ValueError("payload needs 'job': the trainctl job whose Spot instances are reclaimed")
    after = float(payload.get("after_seconds") or 0)
    if after < 0:
        raise ValueError("after_seconds must be >= 0")
    tagged = sorted((i for b in _backends(ctx, payload) for i in b.all_instances()
                     if any(t["key"] == JOB_TAG and t["value"] == job for t in i.get_tags())), key=lambda i: i.id)
    if not tagged:
        raise _not_found(f"no sandbox training job named {job!r} and no EC2 instance tagged {JOB_TAG}={job}")
    spot = [i for i in tagged if i._state.name in ("pending", "running") and i.lifecycle == "spot"]
    chosen = [i for i in spot if i.id in payload["instance_ids"]] if payload.get("instance_ids") else \
        spot[:int(payload.get("count") or 1)]
    if not chosen:
        raise ValueError(f"{job} has no running Spot instance to reclaim (only Spot instances are reclaimed)")
    when = (datetime.now(timezone.utc) + timedelta(seconds=after)).strftime("%Y-%m-%dT%H:%M:%SZ")
    with _lock:
        for instance in chosen:
            _notices[instance.id] = {"action": "terminate", "time": when}
    if after == 0:
        for instance in chosen:
            _reclaim(instance)
    else:
        for instance in chosen:
            timer = threading.Timer(after, _reclaim, args=(instance,))
            timer.daemon = True
            with _lock:
                _timers.append(timer)
            timer.start()
    return {"job": job, "instance_ids": [i.id for i in chosen], "action": "terminate", "time": when}


def spot_instance_action(ctx: SandboxContext, payload: dict[str, Any]) -> dict[str, Any]:
    """What the instance's metadata item spot/instance-action holds (404 when EC2 posted no notice)."""
    instance = _instance(ctx, payload)
    with _lock:
        notice = _notices.get(instance.id)
    if notice is None:
        raise _not_found(f"no Spot interruption notice for {instance.id}")
    return {"instance_id": instance.id, **notice}


def shutdown_instance(ctx: SandboxContext, payload: dict[str, Any]) -> dict[str, Any]:
    """`shutdown -h` inside the instance: terminated or stopped as its InstanceInitiatedShutdownBehavior says."""
    instance = _instance(ctx, payload)
    with _lock:
        if instance._state.name not in ("pending", "running"):
            raise ValueError(f"{instance.id} is {instance._state.name}: only a running instance shuts down")
        behavior = instance.instance_initiated_shutdown_behavior or "stop"
        instance.terminate() if behavior == "terminate" else instance.stop()
        _ended(instance, SHUTDOWN_CODE, "Initiated by the instance")
    return {"instance_id": instance.id, "state": instance._state.name}


def reset(ctx: SandboxContext) -> None:
    with _lock:
        for timer in _timers:
            timer.cancel()
        _timers.clear()
        _notices.clear()


shutdown = reset

ADMIN_ACTIONS = {"reclaim_spot_instances": reclaim_spot_instances, "spot_instance_action": spot_instance_action,
                 "shutdown_instance": shutdown_instance}
