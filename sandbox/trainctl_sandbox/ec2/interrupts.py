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

import re
import threading
from datetime import datetime, timedelta, timezone
from typing import Any

from trainctl_sandbox.server import backend_lock
from trainctl_sandbox.server.context import AdminError, SandboxContext

JOB_TAG = "trainctl:job"
SPOT_CODE, SHUTDOWN_CODE = "Server.SpotInstanceTermination", "Client.InstanceInitiatedShutdown"

_lock = threading.Lock()
_notices: dict[str, dict[str, str]] = {}     # instance id -> spot/instance-action
_timers: list[threading.Timer] = []
_watchers: list[threading.Event] = []        # reclaims waiting for a step (at_step)


def _not_found(message: str) -> Exception:
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


def ended(instance: Any, code: str, message: str) -> None:
    from moto.ec2.models.instances import StateReason

    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    instance.state_reason = StateReason(f"{code}: {message}", code)
    # The time in StateTransitionReason is what tells when the instance ended (trainctl's dollars read it).
    instance._reason = f"Service initiated ({now} GMT)" if code.startswith("Server.") else \
        f"User initiated ({now} GMT)"


def _reclaim(instance: Any) -> None:
    with backend_lock.EC2, _lock:
        if instance._state.name not in ("pending", "running"):
            return  # ended meanwhile (by its owner, or its own shutdown): nothing left to reclaim
        instance.terminate()
        ended(instance, SPOT_CODE, "Spot instance termination")


STEP = re.compile(r"trainctl step=(\d+) ")
STEP_POLL_S = 0.25


def _logged_step(account: str, region: str, job: str) -> int:
    """The highest `trainctl step=N` any node of the job has shipped to CloudWatch Logs so far (-1: none)."""
    from moto.logs.models import logs_backends

    group = logs_backends[account][region].groups.get(f"/trainctl/{job}")
    if group is None:
        return -1
    return max((int(m.group(1)) for stream in list(group.streams.values()) for event in list(stream.events)
                if (m := STEP.search(event.message))), default=-1)


def _reclaim_at_step(ctx: SandboxContext, payload: dict[str, Any], at_step: int, done: threading.Event) -> None:
    account = payload.get("account_id") or ctx.account_id
    regions = [payload["region"]] if payload.get("region") else list(ctx.regions)
    while not done.wait(STEP_POLL_S):
        if any(_logged_step(account, region, payload["job"]) >= at_step for region in regions):
            try:
                reclaim_spot_instances(ctx, {k: v for k, v in payload.items() if k != "at_step"})
            except Exception:  # noqa: BLE001 - nothing left to reclaim by then (ended meanwhile): nothing to do
                pass
            return


def reclaim_spot_instances(ctx: SandboxContext, payload: dict[str, Any]) -> dict[str, Any]:
    """Reclaim `count` (1) running Spot instances of the trainctl job `job` (or the `instance_ids` given):
    the notice now, the termination `after_seconds` (0) from now. With `at_step`: all that once a node of the
    job has logged `trainctl step=N` with N >= at_step (the job's log group, as the node agent ships it)."""
    job = payload.get("job") or payload.get("name")
    if not job:
        raise ValueError("payload needs 'job': the trainctl job whose Spot instances are reclaimed")
    after = float(payload.get("after_seconds") or 0)
    if after < 0:
        raise ValueError("after_seconds must be >= 0")
    if payload.get("at_step") is not None:
        _tagged_live_spot(ctx, payload, job)  # the job must have one now, as for a reclaim now
        done = threading.Event()
        with _lock:
            _watchers.append(done)
        threading.Thread(target=_reclaim_at_step, args=(ctx, {**payload, "job": job}, int(payload["at_step"]), done),
                         name=f"reclaim-{job}-at-step", daemon=True).start()
        return {"job": job, "instance_ids": [], "at_step": int(payload["at_step"]), "after_seconds": after,
                "scheduled": True}
    spot = _tagged_live_spot(ctx, payload, job)
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


def _tagged_live_spot(ctx: SandboxContext, payload: dict, job: str) -> list[Any]:
    tagged = sorted((i for b in _backends(ctx, payload) for i in b.all_instances()
                     if any(t["key"] == JOB_TAG and t["value"] == job for t in i.get_tags())), key=lambda i: i.id)
    if not tagged:
        raise _not_found(f"no sandbox training job named {job!r} and no EC2 instance tagged {JOB_TAG}={job}")
    spot = [i for i in tagged if i._state.name in ("pending", "running") and i.lifecycle == "spot"]
    if not spot:
        raise ValueError(f"{job} has no running Spot instance to reclaim (only Spot instances are reclaimed)")
    return spot


def notice_of(instance_id: str) -> dict[str, str] | None:
    """The instance's spot/instance-action, as its IMDS answers it (imds.py); None before any notice."""
    with _lock:
        notice = _notices.get(instance_id)
    return dict(notice) if notice else None


def spot_instance_action(ctx: SandboxContext, payload: dict[str, Any]) -> dict[str, Any]:
    """What the instance's metadata item spot/instance-action holds (404 when EC2 posted no notice)."""
    instance = _instance(ctx, payload)
    with _lock:
        notice = _notices.get(instance.id)
    if notice is None:
        raise _not_found(f"no Spot interruption notice for {instance.id}")
    return {"instance_id": instance.id, **notice}


def shutdown_instance(ctx: SandboxContext, payload: dict[str, Any]) -> dict[str, Any]:
    """`shutdown -h` inside the instance: terminated or stopped as its InstanceInitiatedShutdownBehavior says;
    `after_seconds` (`shutdown -h +N`: N minutes) later."""
    instance = _instance(ctx, payload)
    after = float(payload.get("after_seconds") or 0)
    if after > 0:
        timer = threading.Timer(after, _shut_down_quietly, args=(instance,))
        timer.daemon = True
        with _lock:
            _timers.append(timer)
        timer.start()
        return {"instance_id": instance.id, "state": instance._state.name, "after_seconds": after}
    return _shut_down(instance)


def _shut_down_quietly(instance: Any) -> None:
    try:
        _shut_down(instance)
    except ValueError:
        pass  # ended meanwhile (reclaimed, terminated by its owner): nothing left to shut down


def _shut_down(instance: Any) -> dict[str, Any]:
    with backend_lock.EC2, _lock:
        if instance._state.name not in ("pending", "running"):
            raise ValueError(f"{instance.id} is {instance._state.name}: only a running instance shuts down")
        behavior = instance.instance_initiated_shutdown_behavior or "stop"
        instance.terminate() if behavior == "terminate" else instance.stop()
        ended(instance, SHUTDOWN_CODE, "Initiated by the instance")
    return {"instance_id": instance.id, "state": instance._state.name}


def reset(ctx: SandboxContext) -> None:
    with _lock:
        for done in _watchers:
            done.set()
        _watchers.clear()
        for timer in _timers:
            timer.cancel()
        _timers.clear()
        _notices.clear()


shutdown = reset

ADMIN_ACTIONS = {"reclaim_spot_instances": reclaim_spot_instances, "spot_instance_action": spot_instance_action,
                 "shutdown_instance": shutdown_instance}
