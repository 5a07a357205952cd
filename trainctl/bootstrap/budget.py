"""The job's budget (`constraints.budget_usd`), enforced on the node itself: no laptop needs to stay awake.

The node agent asks `reached(agent)` each time it looks at the stop mark and the maximum runtime (every
stop_poll_s while torchrun runs, and before each start). The job has spent its instances' lifetimes (every
instance tagged trainctl:job=<job>, ended ones included: a reclaimed node was billed too), each at its own type's
price per node (`node_hourly_by_type` in config.json: a flexible layout's fleet may launch a dearer type than the
one the plan priced), else at `node_hourly_usd` (the plan's price, the Spot price it expected for Spot; the dearest
type's for a flexible layout). The budget is reached when
- what is spent, plus what the job spends until the next look and the stop's own grace (checkpoint, upload,
  shutdown: `budget_grace_s`), passes the budget; or
- what is spent plus the projected remainder passes it: the remainder is the steps left (the metric line's
  total_steps=, else the entrypoint's `--steps`, else the plan's `total_steps` from the spec's samples and batch)
  at the rate the metric lines of this run show, on every node.
Then the agent writes the job's stop mark with the reason ("budget $X reached: ..."): every node stops the
training as a Spot notice does (checkpointed, uploaded), `watch --recover` launches nothing, and the job's
status names the budget. The dollars here are the launch's price x lifetime; `trainctl cost` shows the
Spot-price-history figure and the billed one (docs/cost-model.md).
Standard library plus boto3 only, as the agent.
"""
from __future__ import annotations

import json
import re
import time
from datetime import datetime, timezone

METRIC = re.compile(r"trainctl step=(\d+) ")
TOTAL = re.compile(r"\btotal_steps=(\d+)")
_ENDED = re.compile(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:GMT|UTC)\)")
DEFAULT_GRACE_S = 60.0   # a stop's checkpoint, upload and shutdown, while the nodes still bill
REASON_PREFIX = "budget $"
MARKS = (0.5, 0.8, 1.0)  # the budget's marks the job's SNS topic hears of (`launch --notify`)


class Progress:
    """The run's metric lines, as the agent ships them: step and time of the first and the newest."""

    def __init__(self, total_steps: int | None):
        self.total = total_steps
        self.first: tuple[int, float] | None = None
        self.last: tuple[int, float] | None = None

    def feed(self, line: str) -> None:
        m = METRIC.search(str(line))
        if not m:
            return
        point = (int(m.group(1)), time.time())
        if self.last is None or point[0] <= self.last[0]:  # a restart from a checkpoint: measure the new run only
            self.first = point
        self.last = point
        total = TOTAL.search(str(line))
        if total:
            self.total = int(total.group(1))

    def seconds_left(self) -> float | None:
        if not (self.first and self.last and self.total) or self.last[0] <= self.first[0]:
            return None
        rate = (self.last[0] - self.first[0]) / max(self.last[1] - self.first[1], 1e-6)
        return max(0, self.total - self.last[0]) / rate


def _steps(cfg: dict) -> int | None:
    """The run's total steps: the bundled entrypoints' --steps, else the plan's (the spec's samples over the batch
    of every rank: `total_steps` in the node config), so the projection works for any script."""
    args = [str(a) for a in cfg.get("args") or []]
    try:
        if "--steps" in args[:-1]:
            return int(args[args.index("--steps") + 1])
    except ValueError:
        pass
    return int(cfg["total_steps"]) if cfg.get("total_steps") else None


def _guard(agent) -> Progress:
    """The agent's Progress, made on the first look: from then on every line the agent ships feeds it."""
    progress = agent.__dict__.get("_budget_progress")
    if progress is None:
        progress = agent.__dict__["_budget_progress"] = Progress(_steps(agent.cfg))
        ship = agent.log.add
        agent.log.add = lambda line: (progress.feed(line), ship(line))[1]
    return progress


def _ended_at(inst: dict, now: float) -> float:
    if inst["State"]["Name"] not in ("shutting-down", "terminated", "stopping", "stopped"):
        return now
    m = _ENDED.search(inst.get("StateTransitionReason") or "")
    if not m:
        return inst["LaunchTime"].timestamp()
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()


def node_prices(cfg: dict) -> tuple[dict[str, float], float]:
    """({instance type: $/h per node}, the $/h of a type the config does not price): the launch's prices."""
    by_type = {str(t): float(p) for t, p in (cfg.get("node_hourly_by_type") or {}).items() if p}
    other = float(cfg.get("node_hourly_usd") or 0.0) or max(by_type.values(), default=0.0)
    return by_type, max(other, *by_type.values()) if by_type else other


def dollars(found: list[dict], by_type: dict[str, float], other: float, now: float,
            on_demand_hourly: float | None = None) -> tuple[float, float, int]:
    """(what the instances spent from launch to their end, or now; the $/h of those still running; how many run),
    each instance at its own type's price; an On-Demand replacement of a Spot job (tagged trainctl:market=on-demand
    by replacement.py) at `on_demand_hourly`. Pure: the tests check it directly."""
    spent, hourly, running = 0.0, 0.0, 0
    for inst in found:
        fallback = {"Key": "trainctl:market", "Value": "on-demand"} in inst.get("Tags", [])
        price = on_demand_hourly if fallback and on_demand_hourly else by_type.get(inst.get("InstanceType", ""), other)
        start = inst["LaunchTime"].timestamp()
        spent += max(0.0, _ended_at(inst, now) - start) / 3600 * price
        if inst["State"]["Name"] in ("pending", "running"):
            hourly, running = hourly + price, running + 1
    return spent, hourly, running


def job_instances(ec2, job: str) -> list[dict]:
    """Every instance tagged for the job, ended ones included."""
    pages = ec2.get_paginator("describe_instances").paginate(Filters=[{"Name": "tag:trainctl:job", "Values": [job]}])
    return [inst for page in pages for reservation in page["Reservations"] for inst in reservation["Instances"]]


def spent_usd(ec2, job: str, cfg: dict, now: float) -> tuple[float, float, int]:
    """(the job's dollars so far, the $/h of its running instances, how many run), each at its own type's price,
    an On-Demand replacement at the On-Demand price the launch wrote (node_recovery.py)."""
    by_type, other = node_prices(cfg)
    od = (cfg.get("replacement") or {}).get("on_demand_hourly_usd")
    return dollars(job_instances(ec2, job), by_type, other, now, float(od) if od else None)


def verdict(budget: float, spent: float, hourly_all: float, margin_s: float, left_s: float | None) -> str | None:
    """Why the budget is reached (the stop mark's text), or None. Pure: the tests check it directly."""
    soon = spent + hourly_all * margin_s / 3600
    if soon >= budget:
        return f"{REASON_PREFIX}{budget:g} reached: ${spent:.4f} spent, ${soon - spent:.4f} more before the stop ends"
    if left_s is not None and spent + hourly_all * left_s / 3600 > budget:
        projected = spent + hourly_all * left_s / 3600
        return (f"{REASON_PREFIX}{budget:g} reached: ${spent:.4f} spent, ${projected:.4f} projected at the "
                "measured rate")
    return None


def reached(agent) -> str | None:
    """Why the job's budget stops it now (the stop mark's text), or None; the caller (outcome.limit_reached) marks
    the job stopped. Counted from EC2 alone: S3 failing never keeps a budget from stopping the job."""
    cfg = agent.cfg
    budget = cfg.get("budget_usd")
    node_hourly = node_prices(cfg)[1]   # the dearest type's: a node not up yet may be of it
    if not budget or not node_hourly:
        return None
    progress = _guard(agent)
    now = time.time()
    try:
        spent, hourly, running = spent_usd(agent.ec2, agent.job, cfg, now)
    except Exception as e:  # noqa: BLE001 - EC2 unreachable this once: look again next round
        agent.log.add(f"trainctl-agent: could not count the job's dollars: {e}")
        return None
    # what the job spends per hour from now: its running nodes at their own prices, a node not up yet (a
    # replacement on its way) at the dearest price the fleet may launch
    hourly_all = hourly + node_hourly * max(0, int(cfg.get("nnodes") or 1) - running)
    margin = agent.setting("stop_poll_s", 30.0) + agent.setting("budget_grace_s", DEFAULT_GRACE_S)
    for mark in MARKS:
        if spent >= mark * float(budget):
            news(agent, f"budget:{round(mark * 100)}", f"{round(mark * 100)}% of the ${float(budget):g} budget spent "
                                                       f"(${spent:.4f})", spent)
    why = verdict(float(budget), spent, hourly_all, margin, progress.seconds_left())
    if why is None:
        return None
    agent.log.add(f"trainctl-agent: {why}; stopping the job")
    news(agent, "budget:stop", f"stopping: {why}", spent)
    return why


def news(agent, event: str, text: str, spent: float | None) -> None:
    """One message to the job's SNS topic, once per job whatever the number of nodes: the node whose S3 write of
    <job>/status/news-<event> succeeds (If-None-Match: *, S3's conditional write) sends it."""
    topic = agent.cfg.get("notify_topic")
    if not topic:
        return
    from .node_io import aws_session

    key = agent.key("status", "news-" + event.replace(":", "-"))
    try:
        agent.s3.put_object(Bucket=agent.cfg["bucket"], Key=key, Body=text.encode(), IfNoneMatch="*", **agent.owner)
    except Exception as e:  # noqa: BLE001 - 412: another node sent it; anything else: said, not fatal
        if "PreconditionFailed" not in str(e) and "412" not in str(e):
            agent.log.add(f"trainctl-agent: could not record the news {event}: {e}")
        return
    body = {"job_id": agent.job, "event": event, "message": f"{agent.job}: {text}", "spent_usd": None if spent is None else round(spent, 6),
            "budget_usd": agent.cfg.get("budget_usd"), "sender": f"node agent on {agent.instance_id}"}
    try:
        aws_session(topic.split(":")[3])("sns").publish(TopicArn=topic, Subject=f"trainctl {agent.job}: {event}"[:100],
                                                        Message=json.dumps(body))
    except Exception as e:  # noqa: BLE001
        agent.log.add(f"trainctl-agent: could not publish the news {event}: {e}")
