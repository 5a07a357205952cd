"""Unattended recovery: the survivors of a Spot reclaim replace the lost nodes themselves, no laptop needed.

While fewer than N nodes are live, every survivor's agent calls `tend(agent, ips)` once per peer poll. Only the
lowest live rank acts; its claim is an S3 conditional write (If-None-Match: *, S3 User Guide "conditional
writes") of <job>/status/replace-<k>-<t> (the k-th replacement of the job, its t-th try), so two agents never
launch for the same try, and `watch --recover` takes the same claim (backends/ec2/replacement_claim.py).
It launches the missing count with CreateFleet type instant (all or nothing: MinTargetCapacity, which EC2 takes
for instant fleets only) from the job's own launch template, into the survivors' subnet and cluster placement
group, tagged with the job; the node role may launch from this job's template only (iam/node_role.py).

Bounds: at most `max_replacements` replacements per job; after a refusal (no capacity) the next try waits,
doubling from `replace_backoff_s` to BACKOFF_MAX_S (the refusal's key carries the time of the next try);
the job's budget counts every instance, replacements included (budget.py). `on_spot_shortage` decides what a
shortage of Spot capacity does, from the first try of a replacement: `wait` keeps trying Spot up to
`max_spot_wait_s`, `on-demand` launches On-Demand after `spot_try_s` of refusals or sooner when the deadline
would break, `fail` ends the job there with a one-line reason. A stop mark (`stop`, `down`, the budget) ends it
for good: the mark is read before the claim and again after CreateFleet, and what a stopped job got is terminated.
Each replacement is recorded as <job>/status/replaced-<k> (JSON), which `watch` and `ls` show, and is news
(budget.news: the job's SNS topic). Standard library plus boto3 only, as the agent.
"""
from __future__ import annotations

import json
import math
import re
import time

from . import budget

JOB_TAG, MARKET_TAG, TERMINATED_BY_TAG = "trainctl:job", "trainctl:market", "trainctl:terminated-by"
CLAIM = re.compile(r"^replace-(\d+)-(\d+)$")
REFUSED = re.compile(r"^refused-(\d+)-(\d+)-(\d+)$")      # refused-<k>-<t>-<epoch of the next try>
REPLACED = re.compile(r"^replaced-(\d+)$")
BACKOFF_FIRST_S, BACKOFF_MAX_S = 15.0, 300.0
CLAIM_TTL_S = 300.0   # a claim with no outcome after this long: its agent died mid-try; the next may try again
SPOT_TRY_S = 600.0    # on-demand/fail: how long Spot is tried before falling back, when the deadline allows it
MAX_REPLACEMENTS = 10
SPOT_ENDED = "Server.SpotInstanceTermination"


def decide(policy: str, market: str, waited_s: float, spot_try_s: float, max_wait_s: float,
           slack_s: float | None) -> tuple[str, str]:
    """(market to launch | "fail", why). Pure. `waited_s`: since the replacement's first try; `slack_s`: seconds
    the deadline leaves beyond the training still to do (None: no deadline)."""
    if market != "spot":
        return market, ""
    slack = math.inf if slack_s is None else max(0.0, slack_s)
    if policy == "wait":
        if waited_s >= max_wait_s:
            return "fail", f"no Spot capacity for a replacement in {waited_s / 3600:.2f} h (max_spot_wait_hours)"
        return "spot", ""
    give_up_at = min(spot_try_s, slack, max_wait_s)
    if waited_s < give_up_at:
        return "spot", ""
    why = ("the deadline cannot wait for Spot" if slack <= min(spot_try_s, max_wait_s)
           else f"no Spot capacity for a replacement in {waited_s:.0f} s")
    return ("on-demand", why) if policy == "on-demand" else ("fail", f"{why} (on_spot_shortage: fail)")


def backoff_s(first_s: float, refusals: int) -> float:
    return min(BACKOFF_MAX_S, first_s * 2 ** max(0, refusals - 1))


class Ledger:
    """What the job's status folder says about replacements: done (k), tries of the current one, when the next
    may go, and when its first try was made."""

    def __init__(self, listing: list[dict], now: float):
        names = {o["Key"].rsplit("/", 1)[-1]: o for o in listing}
        self.names = set(names)
        self.done = sum(1 for n in names if REPLACED.match(n))
        self.k = self.done + 1
        claims = {int(m.group(2)): names[n] for n in names if (m := CLAIM.match(n)) and int(m.group(1)) == self.k}
        refused = {int(m.group(2)): float(m.group(3)) for n in names
                   if (m := REFUSED.match(n)) and int(m.group(1)) == self.k}
        self.tries, self.refusals = len(claims), len(refused)
        self.first_at = min((_stamp(o) for o in claims.values()), default=now)
        last = max(claims) if claims else 0
        self.open_claim = bool(last) and last not in refused and now - _stamp(claims[last]) < CLAIM_TTL_S
        self.not_before = refused.get(last, 0.0)

    def ended(self) -> str | None:
        return next((s for s in ("stopped", "completed", "failed") if s in self.names), None)


def _stamp(obj: dict) -> float:
    when = obj.get("LastModified")
    return when.timestamp() if hasattr(when, "timestamp") else time.time()


def tend(agent, ips: list[str]) -> None:
    """One look, from the wait for peers: replace what a Spot reclaim took, if this node is the one to."""
    cfg = agent.cfg.get("replacement")
    if not cfg or not ips or agent.ip != ips[0] or agent.notice.is_set():
        return
    try:
        _tend(agent, cfg, ips)
    except Exception as e:  # noqa: BLE001 - the next poll looks again; the peer wait stays bounded
        agent.log.add(f"trainctl-agent: replacement: {e}")


def _tend(agent, cfg: dict, ips: list[str]) -> None:
    found = _instances(agent)
    live = [i for i in found if i["State"]["Name"] in ("pending", "running") and _tag(i, "trainctl:state") != "interrupted"]
    missing = int(agent.cfg["nnodes"]) - len(live)
    if missing <= 0:
        return
    if any(_lost_otherwise(i) for i in found):
        return  # not a Spot reclaim: the job fails (status.py); a replacement would most likely end the same way
    now = time.time()
    ledger = Ledger(_status_listing(agent), now)
    if ledger.ended() or ledger.open_claim or now < ledger.not_before:
        return
    if ledger.done >= int(cfg.get("max_replacements", MAX_REPLACEMENTS)):
        return _fail(agent, f"{ledger.done} nodes replaced already (the most this job replaces); Spot reclaims it too "
                            f"often here: relaunch it on another layout or On-Demand")
    market, why = decide(cfg.get("on_spot_shortage", "wait"), cfg.get("market", "spot"), now - ledger.first_at,
                         agent.setting("spot_try_s", SPOT_TRY_S), float(cfg.get("max_spot_wait_s", 4 * 3600)),
                         _slack(agent, cfg, found, now))
    if market == "fail":
        return _fail(agent, f"no replacement for the {missing} reclaimed node{'s' * (missing > 1)}: {why}")
    if market == "on-demand" and cfg.get("market", "spot") == "spot" and not _fallback_fits(agent, cfg, missing):
        return _fail(agent, "an On-Demand replacement would pass the job's budget")
    if not ledger.tries:
        _news(agent, f"interruption:{ledger.k}", f"{missing} node{'s' * (missing > 1)} lost to a Spot reclaim; "
                                                 f"{len(live)} wait for the replacement")
    t = ledger.tries + 1
    if not _claim(agent, f"replace-{ledger.k}-{t}", {"by": agent.instance_id, "market": market, "missing": missing}):
        return  # another agent (or `watch --recover`) took this try
    if agent.marker():  # stopped (or ended) since the listing: launch nothing
        return
    if why:
        hourly = float(cfg.get("on_demand_hourly_usd") or 0) * missing
        said = f"{why}: replacing {missing} node{'s' * (missing > 1)} On-Demand (+${hourly:.4f}/h)"
        agent.log.add(f"trainctl-agent: {said}")
        _news(agent, f"fallback:{ledger.k}", said)
    got, codes = _launch(agent, cfg, ledger.k, t, missing, market)
    _settle(agent, cfg, ledger, t, missing, market, got, codes, live)


def _settle(agent, cfg, ledger: Ledger, t: int, missing: int, market: str, got: list[str], codes: list[str],
            live: list[dict]) -> None:
    k = ledger.k
    if len(got) < missing:
        _terminate(agent, got)  # all or nothing
        wait = backoff_s(agent.setting("replace_backoff_s", BACKOFF_FIRST_S), ledger.refusals + 1)
        _put(agent, f"refused-{k}-{t}-{int(time.time() + wait)}", {"codes": codes, "got": len(got)})
        agent.log.add(f"trainctl-agent: replacement {k} try {t}: {market} gave {len(got)} of {missing} "
                      f"({'; '.join(sorted(set(codes))) or 'no error given'}); next try in {wait:.0f} s")
        return
    if agent.marker() == "stopped":  # `stop`/`down` came while the fleet was made: this recovery ends them
        agent.log.add(f"trainctl-agent: the job was stopped during replacement {k}; terminating {', '.join(got)}")
        _terminate(agent, got)
        return
    az = live[0]["Placement"]["AvailabilityZone"] if live else None
    hourly = float(cfg.get("on_demand_hourly_usd") if market == "on-demand" else agent.cfg.get("node_hourly_usd")
                   or 0.0)
    record = {"instance_ids": got, "market": market, "availability_zone": az, "tries": t, "at": round(time.time()),
              "by": agent.instance_id, "hourly_usd_per_node": hourly or None}
    _put(agent, f"replaced-{k}", record)
    agent.log.add(f"trainctl-agent: replacement {k}: {', '.join(got)} ({market}) in {az} after {t} "
                  f"tr{'ies' if t > 1 else 'y'}; the job goes on from its last checkpoint")
    _news(agent, f"replacement:{k}", f"replaced {missing} reclaimed node{'s' * (missing > 1)} with "
                                     f"{', '.join(got)} ({market}, {az})")


def _launch(agent, cfg: dict, k: int, t: int, count: int, market: str) -> tuple[list[str], list[str]]:
    me = agent.ec2.describe_instances(InstanceIds=[agent.instance_id])["Reservations"][0]["Instances"][0]
    group = (me.get("Placement") or {}).get("GroupName")
    override = {"InstanceType": me["InstanceType"], "SubnetId": me["SubnetId"],
                **({"Placement": {"GroupName": group}} if group else {})}
    tags = [{"Key": JOB_TAG, "Value": agent.job}, {"Key": MARKET_TAG, "Value": market}]
    single = {"SingleAvailabilityZone": True, "SingleInstanceType": True, "MinTargetCapacity": count}
    params = {"Type": "instant", "ClientToken": f"{agent.job}-r{k}-{t}"[-64:],
              "LaunchTemplateConfigs": [{"LaunchTemplateSpecification": {"LaunchTemplateName": cfg["launch_template"],
                                                                         "Version": "$Latest"},
                                         "Overrides": [override]}],
              "TargetCapacitySpecification": {"TotalTargetCapacity": count, "DefaultTargetCapacityType": market},
              "TagSpecifications": [{"ResourceType": "fleet", "Tags": tags}, {"ResourceType": "instance", "Tags": tags}]}
    if market == "spot":
        params["SpotOptions"] = {"AllocationStrategy": "capacity-optimized", "InstanceInterruptionBehavior": "terminate",
                                 **single}
    else:
        params["OnDemandOptions"] = {"AllocationStrategy": "lowest-price", **single}
    agent.log.add(f"trainctl-agent: replacement {k} try {t}: CreateFleet {count} x {me['InstanceType']} {market} "
                  f"in {me['Placement']['AvailabilityZone']}")
    try:
        response = agent.ec2.create_fleet(**params)
    except Exception as e:  # noqa: BLE001 - e.g. the launch template gone under `down`: a refusal, said
        return [], [type(e).__name__ + ": " + str(e)[:200]]
    got = [i for g in response.get("Instances", []) for i in g.get("InstanceIds", [])]
    return got, [e.get("ErrorCode", "?") for e in response.get("Errors", [])]


def _fallback_fits(agent, cfg: dict, missing: int) -> bool:
    """An On-Demand replacement keeps the job within its budget at the rate measured so far (no budget: yes)."""
    total, od = agent.cfg.get("budget_usd"), float(cfg.get("on_demand_hourly_usd") or 0)
    left = budget._guard(agent).seconds_left() if total else None
    if not total or left is None or not od:
        return True
    spent = budget.spent_usd(agent.ec2, agent.job, agent.cfg, time.time())[0]
    spot = float(agent.cfg.get("node_hourly_usd") or 0) * (int(agent.cfg["nnodes"]) - missing)
    return spent + (spot + od * missing) * left / 3600 <= float(total)


def _slack(agent, cfg: dict, found: list[dict], now: float) -> float | None:
    """Seconds the deadline (from the job's first launch) leaves after the training still to do; None without one."""
    hours = cfg.get("deadline_hours")
    if not hours or not found:
        return None
    start = min(i["LaunchTime"].timestamp() for i in found)
    left = budget._guard(agent).seconds_left() or 0.0
    return start + float(hours) * 3600 - now - left - float(cfg.get("restart_s", 0))


def _fail(agent, reason: str) -> None:
    agent.log.add(f"trainctl-agent: {reason}; failing the job")
    agent.put_marker("failed", reason, only_first=True)
    _news(agent, "replacement:failed", reason)


def _claim(agent, name: str, body: dict) -> bool:
    try:
        agent.s3.put_object(Bucket=agent.cfg["bucket"], Key=agent.key("status", name), IfNoneMatch="*",
                            Body=json.dumps({**body, "at": round(time.time())}).encode(), **agent.owner)
        return True
    except Exception as e:  # noqa: BLE001 - 412 (or 409, a concurrent write): taken
        if any(s in str(e) for s in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409")):
            return False
        raise


def _put(agent, name: str, body: dict) -> None:
    agent.s3.put_object(Bucket=agent.cfg["bucket"], Key=agent.key("status", name), Body=json.dumps(body).encode(),
                        **agent.owner)


def _status_listing(agent) -> list[dict]:
    out, token = [], {}
    while True:
        page = agent.s3.list_objects_v2(Bucket=agent.cfg["bucket"], Prefix=agent.key("status") + "/", **token,
                                        **agent.owner)
        out += page.get("Contents", [])
        if not page.get("IsTruncated"):
            return out
        token = {"ContinuationToken": page["NextContinuationToken"]}


def _instances(agent) -> list[dict]:
    pages = agent.ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": f"tag:{JOB_TAG}", "Values": [agent.job]}])
    return [i for page in pages for r in page["Reservations"] for i in r["Instances"]]


def _tag(inst: dict, key: str) -> str | None:
    return next((t["Value"] for t in inst.get("Tags", []) if t["Key"] == key), None)


def _lost_otherwise(inst: dict) -> bool:
    """Ended, but neither by trainctl nor by a Spot reclaim (its own agent failed it, or EC2 had no room)."""
    if inst["State"]["Name"] in ("pending", "running") or _tag(inst, TERMINATED_BY_TAG):
        return False
    return (inst.get("StateReason") or {}).get("Code") != SPOT_ENDED and _tag(inst, "trainctl:state") != "interrupted"


def _terminate(agent, ids: list[str]) -> None:
    if ids:
        agent.ec2.create_tags(Resources=ids, Tags=[{"Key": TERMINATED_BY_TAG, "Value": "trainctl"}])
        agent.ec2.terminate_instances(InstanceIds=ids)


def _news(agent, event: str, text: str) -> None:
    budget.news(agent, event, text, None)


def announce_end(agent) -> None:
    """The job's end as news, once per job (the first node to see it sends it)."""
    try:
        status = agent.marker()
    except Exception:  # noqa: BLE001 - S3 unreachable: nothing to say
        return
    if status:
        _news(agent, f"end:{status}", f"{status}")
