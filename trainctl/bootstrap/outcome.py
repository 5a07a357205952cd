"""What a run of the training means, decided by the node agent from what it knows, never from the script's output.

The job's signals, shared by every node through S3 and EC2:
- a Spot notice: the node that gets it tags itself trainctl:state=interrupted (its peers leave it out) and writes
  s3://<bucket>/<job>/status/interrupted-<instance id>; a node reclaimed without one drops out of the job's live
  instances. Either way every node's run is interrupted: they stop the training (checkpointed) and wait for the
  replacement, whatever the script's exit code;
- the stop mark (status/stopped: `trainctl stop`/`down`, the budget, the maximum runtime): stopped;
- status/failed, written by the first node whose script failed: the others stop within a poll and the grace,
  and shut down.
An exit 0 with none of these is completed; a non-zero exit is a failure, with SageMaker's failure reason
(/opt/ml/output/failure first, else the tail of the script's stderr), rerun only `max_retries` times.

The limits (maximum runtime, budget) are checked on their own, before S3 is read: a throttled or unreachable S3
delays nothing, and a stop mark that cannot be written still stops this node's training.
"""
from __future__ import annotations

import os
import threading
import time

from . import budget, membership, replacement

NOTICE_PREFIX = "interrupted-"
# A failed job's other nodes: its checkpoints are no longer worth 120 s of billing. With the 30 s status poll, a
# survivor is gone within a minute of the failure.
PEER_FAILED_GRACE_S = 20.0


def notices_now(agent) -> set[str]:
    try:
        return {n for n in agent.status_names() if n.startswith(NOTICE_PREFIX)}
    except Exception:  # noqa: BLE001 - none known: any seen later counts (a stale one only stops this run early)
        return set()


def on_notice(agent, action: str, what: str = "spot interruption notice") -> None:
    agent.log.add(f"trainctl-agent: {what} {action.strip()}; checkpointing")
    # Peers must leave this node out of the next rendezvous: tag first, then tell the job, then stop the training.
    try:
        agent.ec2.create_tags(Resources=[agent.instance_id], Tags=[{"Key": "trainctl:state", "Value": "interrupted"}])
    except Exception as e:  # noqa: BLE001
        agent.log.add(f"trainctl-agent: could not tag this instance interrupted: {e}")
    agent.notice.set()
    try:
        agent.put_marker(NOTICE_PREFIX + str(agent.instance_id), action.strip()[:1000])
    except Exception as e:  # noqa: BLE001 - the tag and the reclaim itself still tell the peers
        agent.log.add(f"trainctl-agent: could not record the notice in S3: {e}")
    agent.terminate_training()
    threading.Thread(target=_sync_now, args=(agent,), daemon=True).start()


def _sync_now(agent) -> None:
    try:
        agent.sync_checkpoints()
    except Exception as e:  # noqa: BLE001 - the final sync retries
        agent.log.add(f"trainctl-agent: checkpoint sync failed: {e}")


def limit_reached(agent) -> bool:
    """The job's maximum runtime or budget ends it now: say which, mark the job stopped if S3 lets us, and set
    stop_requested either way."""
    why = None
    not_after = agent.cfg.get("not_after")
    if not_after and time.time() >= float(not_after):
        why = f"maximum runtime reached ({agent.cfg.get('max_runtime_s')} s)"
        agent.log.add(f"trainctl-agent: the job's maximum runtime ended at {float(not_after):.0f}; stopping it")
    else:
        why = budget.reached(agent)
    if not why:
        return False
    agent.stop_requested.set()
    agent.stop_reason = why
    try:
        if agent.marker() != "stopped":
            agent.put_marker("stopped", why)
    except Exception as e:  # noqa: BLE001 - the training stops all the same
        agent.log.add(f"trainctl-agent: could not write the job's stop mark ({e}); stopping this node anyway")
    return True


def _signal(agent, known: set[str], ips: list[str]) -> str | None:
    """Why the running training must stop now, or None; sets the matching flag."""
    if limit_reached(agent):
        return f"stopped: {agent.stop_reason}"
    why = None
    try:
        names = agent.status_names()
        if "stopped" in names:
            agent.stop_requested.set()
            return "marked stopped"
        if "failed" in names:
            agent.peer_failed.set()
            return "failed on another node"
        own = NOTICE_PREFIX + str(agent.instance_id)
        fresh = sorted(n for n in names if n.startswith(NOTICE_PREFIX) and n not in known and n != own)
        if fresh:
            why = f"interrupted: {fresh[0][len(NOTICE_PREFIX):]} got its Spot notice"
    except Exception as e:  # noqa: BLE001 - S3 hiccup: the limits above were checked all the same
        agent.log.add(f"trainctl-agent: could not read the job's status: {e}")
    if why is None:
        lost = lost_peers(agent, ips)
        why = f"interrupted: node {', '.join(lost)} is gone" if lost else None
    if why is None and membership.min_nodes(agent.cfg):
        why = _joined(agent, ips)
    if why:
        agent.peer_lost.set()
    return why


def _joined(agent, ips: list[str]) -> str | None:
    """An elastic job: a live node outside the running generation (a replacement) joins at this checkpoint."""
    try:
        joined = membership.newcomers(agent.peers(), ips)
    except Exception as e:  # noqa: BLE001 - the next poll looks again
        agent.log.add(f"trainctl-agent: could not look for the job's nodes: {e}")
        return None
    return f"growing: node {', '.join(joined)} joins the training (elastic)" if joined else None


def lost_peers(agent, ips: list[str]) -> list[str]:
    """The run's nodes that are no longer live members of the job (reclaimed, or tagged interrupted)."""
    try:
        live = set(agent.peers())
    except Exception as e:  # noqa: BLE001
        agent.log.add(f"trainctl-agent: could not look for the job's nodes: {e}")
        return []
    return [ip for ip in ips if ip not in live and ip != agent.ip]


def watch_job(agent, done: threading.Event, known: set[str], ips: list[str]) -> None:
    """While the training runs: stop it (checkpointed, as a Spot notice does) on any of the job's signals."""
    while not done.wait(agent.setting("stop_poll_s", 30.0)):
        why = _signal(agent, known, ips)
        if why is None and membership.min_nodes(agent.cfg) and len(ips) < int(agent.cfg["nnodes"]):
            _tend_while_training(agent)
        if why:
            agent.log.add(f"trainctl-agent: the job is {why}; checkpointing and stopping the training")
            agent.terminate_training(min(PEER_FAILED_GRACE_S, agent.stop_grace_s())
                                     if agent.peer_failed.is_set() else None)
            _sync_now(agent)
            return


def _tend_while_training(agent) -> None:
    """An elastic job training below its size: its lowest live node asks for the missing ones meanwhile
    (replacement.py), so the job grows back with nobody watching; the newcomer joins at the next poll."""
    try:
        live = agent.peers()  # sorted by IP: the lowest is the one to ask
    except Exception as e:  # noqa: BLE001 - the next poll looks again
        agent.log.add(f"trainctl-agent: could not look for the job's nodes: {e}")
        return
    replacement.tend(agent, live)


def decide(agent, rc: int, ips: list[str]) -> int | str | None:
    """After a run: an exit code for the agent to return, "retry" (the script failed), or None (wait for the
    replacement of an interrupted node and start again)."""
    if agent.notice.is_set():
        agent.log.add(f"trainctl-agent: interrupted (exit code {rc}); checkpoints synced, leaving the job to the others")
        return 0
    if agent.stop_requested.is_set():
        agent.log.add(f"trainctl-agent: training stopped (exit code {rc}); its checkpoint is in S3")
        return 0
    if agent.peer_failed.is_set():
        agent.log.add("trainctl-agent: another node failed the job; shutting this one down")
        return 1
    if not agent.peer_lost.is_set():  # the script may have exited before the watcher's next look
        own = NOTICE_PREFIX + str(agent.instance_id)
        if notices_now(agent) - agent.known_notices - {own} or lost_peers(agent, ips):
            agent.peer_lost.set()
    if agent.peer_lost.is_set():
        agent.log.add(f"trainctl-agent: interrupted (exit code {rc}): a node of the job was reclaimed; "
                      "waiting for its replacement")
        return None
    if agent.shutting_down.is_set():  # the instance goes down under the script (a reclaim whose notice this agent
        # never saw, a termination): neither the script's failure nor, when the script honoured the SIGTERM and
        # exited 0, the job's completion; there is no next try on this node
        agent.log.add(f"trainctl-agent: this instance is shutting down (SIGTERM; exit code {rc}): recorded as neither "
                      "a failure nor the end of the job; leaving the job to the others")
        return 0
    if rc == 0:
        if ips.index(agent.ip) == 0:
            agent.outputs.upload_model()  # before the marker: `fetch` after `completed` finds it
            agent.put_marker("completed", f"{agent.instance_id} {time.time():.0f}")
        agent.log.add("trainctl-agent: training finished")
        return 0
    return "retry"


def fail_job(agent, rc: int) -> int:
    """The script failed for good: the job's failure reason, as SageMaker's, where `watch` shows it."""
    reason = agent.training.failure_reason(os.path.join(agent.ml, "output", "failure"), rc, agent.instance_id)
    agent.log.add(f"trainctl-agent: {reason}")
    try:
        agent.put_marker("failed", reason, only_first=True)
    except Exception as e:  # noqa: BLE001 - the log says it; the node shuts down all the same
        agent.log.add(f"trainctl-agent: could not record the failure: {e}")
    return rc or 1
