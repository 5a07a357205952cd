"""`trainctl stop` of an EC2 job: the stop mark first, then a bounded wait while the nodes' agents stop the
training, checkpoint, upload and shut their own nodes down, and only then a terminate of the nodes still
running. Terminating at once would leave the checkpoint to the shutdown's SIGTERM reaching the agent while the
network is still up; never terminating would let a node whose agent is dead bill forever."""
from __future__ import annotations

import time
from typing import Callable

from trainctl.backends.ec2.common import LIVE_STATES, PLATFORM, instances
from trainctl.backends.ec2.fleet import terminate
from trainctl.backends.ec2.status import mark_stopped

# The budget is a Spot reclaim's: EC2 gives a Spot node two minutes between its interruption notice and the
# reclaim, and the agent's stop path is the notice's path (SIGTERM, the entrypoint checkpoints, the final sync
# uploads), so a job that survives reclaims checkpoints and uploads within 120 s. Before that the agent needs up
# to its 30 s poll to see the mark: 30 + 120 s, and 30 s for the node's own shutdown (a stopped node's agent
# shuts it down at once, not after a finished job's minute). A node still running then has its checkpoint in
# S3 already, or a dead agent: terminating it loses nothing.
DEFAULT_GRACE_S = 180.0
# The first looks come fast (a node that was already finishing goes at once), then back off: a job of many
# nodes polled for three minutes must not spend its DescribeInstances rate on it.
POLL_FIRST_S, POLL_MAX_S, POLL_BACKOFF = 1.0, 10.0, 1.5
PROGRESS_EVERY_S = 20.0


def _nodes(n: int) -> str:
    return f"{n} node" if n == 1 else f"{n} nodes"


def wait_for_nodes(ec2, job_id: str, grace_s: float, say: Callable[[str], None] = lambda _line: None,
                   running: int | None = None) -> list[str]:
    """Poll until no node of the job is pending or running, or `grace_s` is over; the ones still live then
    (a node a racing `watch --recover` launched included: it is ended with the rest). Says how many are left
    whenever that changes from `running` (the count when the wait began), and at least every PROGRESS_EVERY_S,
    so a long grace is never silent."""
    deadline = time.monotonic() + grace_s
    interval, said, said_at = POLL_FIRST_S, running, time.monotonic()
    while True:
        left = [i["InstanceId"] for i in instances(ec2, job_id, LIVE_STATES)]
        remaining = deadline - time.monotonic()
        if not left or remaining <= 0:
            return left
        if said is not None and (len(left) != said or time.monotonic() - said_at >= PROGRESS_EVERY_S):
            say(f"{_nodes(len(left))} still running; terminating {'it' if len(left) == 1 else 'them'} in "
                f"{remaining:.0f} s unless {'it stops' if len(left) == 1 else 'they stop'} first")
            said_at = time.monotonic()
        said = len(left)
        time.sleep(min(interval, remaining))
        interval = min(interval * POLL_BACKOFF, POLL_MAX_S)


def _interrupted_grace(ec2, job_id: str, say: Callable[[str], None]) -> None:
    """Ctrl-C during the grace: exactly which nodes still run, and what ends them."""
    live = [i["InstanceId"] for i in instances(ec2, job_id, LIVE_STATES)]
    if not live:
        say(f"interrupted: no node of {job_id} is running")
        return
    say(f"interrupted during the grace: still running: {', '.join(live)} (the stop mark is written: their agents "
        f"checkpoint and shut them down by themselves); `trainctl stop {job_id} --grace-seconds 0` ends them now")


def stop(client_for, job_id: str, region: str, grace_s: float | None = None,
         say: Callable[[str], None] | None = None) -> dict:
    """Mark the job stopped (its agents end the run at the mark and no `watch --recover` brings it back), give
    its running nodes `grace_s` seconds to stop themselves, then terminate the rest. Resources stay until
    `trainctl down`. Returns {job_id, platform, region, grace_seconds, stopped_themselves, terminated}."""
    say = say or (lambda _line: None)
    grace = DEFAULT_GRACE_S if grace_s is None else float(grace_s)
    ec2 = client_for("ec2", region)
    # Listed before the mark: a node whose agent sees the mark at once still counts as one that stopped itself.
    running = [i["InstanceId"] for i in instances(ec2, job_id, LIVE_STATES)]
    marked = mark_stopped(client_for, job_id, region)
    waited = bool(running) and marked and grace > 0
    if not running:
        say("stop mark written; no node of the job is running" if marked else "no node of the job is running")
        left = []
    elif waited:
        try:  # from the line on: a Ctrl-C right after it is one during the grace
            say(f"stop mark written; waiting up to {grace:g} s for the {_nodes(len(running))} to checkpoint and "
                f"shut down")
            left = wait_for_nodes(ec2, job_id, grace, say, len(running))
        except KeyboardInterrupt:
            _interrupted_grace(ec2, job_id, say)
            raise
        n = len([i for i in running if i not in left])
        if n:
            say(f"{_nodes(n)} stopped {'itself' if n == 1 else 'themselves'}")
    else:
        # --grace-seconds 0, or no bucket to hold the mark (the agents would have nothing to see): at once.
        say("stop mark written; --grace-seconds 0: no wait" if marked else
            "the job has no bucket for its stop mark, so its agents cannot see one: no wait")
        left = [i["InstanceId"] for i in instances(ec2, job_id, LIVE_STATES)]
    if left:
        terminate(ec2, left)
        say(f"terminated {_nodes(len(left))} {'that did not stop in time' if waited else 'at once'}")
    return {"job_id": job_id, "platform": PLATFORM, "region": region, "grace_seconds": grace,
            "stop_mark": marked, "stopped_themselves": [i for i in running if i not in left], "terminated": left}
