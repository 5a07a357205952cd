"""An EC2 job as `watch` sees it. Status lives where the nodes put it: instance states, S3 markers
<job>/status/<status> and CloudWatch Logs /trainctl/<job> (one stream per instance). Dollars follow the
Spot prices in force while each instance ran (price history), On-Demand at the catalog's price."""
from __future__ import annotations

import os
import re
import time
from datetime import datetime, timedelta, timezone

from trainctl.naming import bucket as layout
from trainctl.backends import logtail
from trainctl.backends.base import JobView, LogLine, Transition
from trainctl.backends.ec2.common import (LIVE_STATES, PLATFORM, STATE_TAG, TERMINATED_BY_TAG, bucket_of,
                                          instances, job_config, log_group, tag_map)

# A node's agent creates its log stream (named by the instance id) first thing after boot; a node running
# longer than this without one never checked in: most often it cannot reach AWS (no public IPv4 and no NAT).
CHECKIN_GRACE_S = 600


def never_checked_in(logs, job_id: str, alive: list[dict], now: float) -> list[str]:
    grace = float(os.environ.get("TRAINCTL_CHECKIN_GRACE_S") or CHECKIN_GRACE_S)
    late = [i["InstanceId"] for i in alive
            if i["State"]["Name"] == "running" and now - i["LaunchTime"].timestamp() >= grace]
    if not late:
        return []
    streams: set[str] = set()
    try:
        pages = logs.get_paginator("describe_log_streams").paginate(logGroupName=log_group(job_id))
        for page in pages:
            streams.update(s["logStreamName"] for s in page.get("logStreams", []))
    except Exception as e:  # noqa: BLE001 - no log group yet: no node checked in
        from trainctl.aws import clients as aws

        if aws.error_code(e) != "ResourceNotFoundException":
            raise
    return [i for i in late if i not in streams]


_ENDED = re.compile(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:GMT|UTC)\)")


def ended_at(inst: dict) -> float | None:
    """When a terminated instance ended: EC2 writes it in StateTransitionReason, "User initiated (... GMT)"."""
    if inst["State"]["Name"] not in ("shutting-down", "terminated"):
        return None
    m = _ENDED.search(inst.get("StateTransitionReason") or "")
    if not m:
        return inst["LaunchTime"].timestamp()
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()


def integrate(points: list[tuple[float, float]], start: float, end: float) -> float:
    """Dollars of one instance from `start` to `end` under a step function of (time, $/h) price changes."""
    if end <= start or not points:
        return 0.0
    total = 0.0
    price = next((p for t, p in reversed(points) if t <= start), points[0][1])
    t0 = start
    for t, p in points:
        if t <= start:
            continue
        if t >= end:
            break
        total += (t - t0) / 3600 * price
        t0, price = t, p
    return total + (end - t0) / 3600 * price


ENDED_STATES = ("shutting-down", "terminated", "stopping", "stopped")
SPOT_RECLAIM = "Server.SpotInstanceTermination"


def interrupted(inst: dict) -> bool:
    """A Spot reclaim: EC2 ended the node for Spot (StateReason Server.SpotInstanceTermination), or its agent got
    the interruption notice and left the job (it tags itself trainctl:state=interrupted). Only these are
    interruptions, and only these `watch --recover` replaces."""
    t = tag_map(inst)
    if inst["State"]["Name"] not in ENDED_STATES or TERMINATED_BY_TAG in t:
        return False
    return (inst.get("StateReason") or {}).get("Code") == SPOT_RECLAIM or t.get(STATE_TAG) == "interrupted"


def lost_otherwise(inst: dict) -> str | None:
    """Why a node ended that trainctl did not end and no Spot reclaim took: its own shutdown (its agent failed,
    or the user data did), EC2 for another reason (no capacity to run it, an internal error), or someone else.
    None for any other node. Such a node is not replaced: its replacement would most likely end the same way."""
    t = tag_map(inst)
    if inst["State"]["Name"] not in ENDED_STATES or TERMINATED_BY_TAG in t or interrupted(inst):
        return None
    reason = inst.get("StateReason") or {}
    said = reason.get("Message") or reason.get("Code") or inst.get("StateTransitionReason") or "no reason given"
    return f"{inst['InstanceId']} {inst['State']['Name']} ({said})"


def _spot_history(ec2, itype: str, az: str, start: float, now: float) -> list[tuple[float, float]]:
    points = []
    pages = ec2.get_paginator("describe_spot_price_history").paginate(
        InstanceTypes=[itype], AvailabilityZone=az, ProductDescriptions=["Linux/UNIX"],
        StartTime=datetime.fromtimestamp(start, timezone.utc) - timedelta(days=1),
        EndTime=datetime.fromtimestamp(now, timezone.utc))
    for page in pages:
        points += [(p["Timestamp"].timestamp(), float(p["SpotPrice"])) for p in page["SpotPriceHistory"]]
    return sorted(points)


def instance_costs(ec2, found: list[dict], region: str, now: float) -> dict[str, float]:
    """Dollars per instance so far: Spot instances at the Spot prices in force while they ran (price
    history of their type and AZ), On-Demand ones at the catalog's On-Demand price."""
    from trainctl.catalog import load_catalog

    cat, out, history = load_catalog(), {}, {}
    for inst in found:
        start = inst["LaunchTime"].timestamp()
        end = max(ended_at(inst) or now, start)
        itype, az = inst["InstanceType"], inst["Placement"]["AvailabilityZone"]
        if inst.get("InstanceLifecycle") != "spot":
            price = cat.on_demand_price("ec2", region, itype)
            out[inst["InstanceId"]] = (end - start) / 3600 * (price.usd_per_hour if price else 0.0)
            continue
        if (itype, az) not in history:
            history[(itype, az)] = _spot_history(ec2, itype, az, start, now)
        out[inst["InstanceId"]] = integrate(history[(itype, az)], start, end)
    return out


def on_demand_equivalent(found: list[dict], region: str, now: float) -> float | None:
    """What the job's instance-hours (each instance from launch to its end) would have cost On-Demand: the
    base of EC2's Spot savings (None when the catalog has no On-Demand price for a type)."""
    from trainctl.catalog import load_catalog

    cat, total = load_catalog(), 0.0
    for inst in found:
        price = cat.on_demand_price("ec2", region, inst["InstanceType"])
        if price is None:
            return None
        start = inst["LaunchTime"].timestamp()
        total += (max(ended_at(inst) or now, start) - start) / 3600 * price.usd_per_hour
    return round(total, 6)


def markers(s3, job_id: str, bucket: str | None, account: str | None = None) -> dict[str, str]:
    """The S3 status markers the nodes (completed, failed) and `stop` (stopped) leave: name -> text."""
    if not bucket:
        return {}
    try:
        found = s3.list_objects_v2(Bucket=bucket, Prefix=layout.status_prefix(job_id),
                                   **layout.owner(account)).get("Contents", [])
    except Exception:  # noqa: BLE001 - no bucket, no markers
        return {}
    prefix = layout.status_prefix(job_id)
    return {o["Key"].rsplit("/", 1)[-1]: s3.get_object(Bucket=bucket, Key=o["Key"], **layout.owner(account))[
        "Body"].read().decode(errors="replace") for o in found
        if "/" not in o["Key"][len(prefix):]}  # status/relaunch/...: claims (bootstrap/relaunch_claim.py), no status


def _status(marks: dict, found: list[dict], alive: list[dict], nodes: int | None,
            job_id: str = "JOB") -> tuple[str, str, str | None]:
    """(status, secondary status, failure reason) in SageMaker's words."""
    if "completed" in marks:
        return "Completed", "Completed", None
    if "failed" in marks:
        running = [i["InstanceId"] for i in alive if i["State"]["Name"] in ("pending", "running")]
        tail = (f" [still running: {', '.join(running)}; its agent shuts it down within a minute, or end it now "
                f"with `trainctl down {job_id}`]") if running else ""
        return "Failed", "Failed", marks["failed"] + tail
    if "stopped" in marks:
        if not alive and not nodes:  # `down` marks the job stopped first, then removes its launch template
            return "Stopped", "Stopped", "stopped; the job's instances and launch template are gone (`trainctl down`)"
        # the node agent says why it stopped the job (its budget, its maximum runtime); `trainctl stop` does not
        why = None if marks["stopped"].startswith("stopped by trainctl") else f"stopped: {marks['stopped']}"
        return ("Stopping", "Stopping", why) if alive else ("Stopped", "Stopped", why)
    if not found:
        return "Failed", "Failed", "no instance of the job exists (never launched, or deleted)"
    gone = [why for i in found if (why := lost_otherwise(i))]
    if gone and (not nodes or len(alive) < nodes):
        return "Failed", "Failed", (f"node {gone[-1]}: not a Spot reclaim, so it is not replaced; "
                                    "its log (`trainctl logs`) says what it did last")
    if not alive and not nodes:
        return "Stopped", "Stopped", "the job's instances and launch template are gone (removed by `trainctl down`?)"
    if nodes and len(alive) < nodes:
        return "InProgress", "Interrupted", None
    if any(i["State"]["Name"] == "pending" for i in alive):
        return "InProgress", "Starting", None
    return "InProgress", "Training", None


def _billable(region: str, itype: str | None, nodes: int | None, wall: int | None, cost: float) -> int | None:
    """SageMaker's definition: the seconds that, at the On-Demand rate of all the nodes, cost what was really
    spent. So `watch` shows the true dollars and the true saving over On-Demand."""
    if wall is None or not itype or not nodes:
        return None
    from trainctl.catalog import load_catalog

    od = load_catalog().on_demand_price("ec2", region, itype)
    return int(round(cost / (od.usd_per_hour * nodes) * 3600)) if od and od.usd_per_hour > 0 else None


def _raw(config: dict, marks: dict, nodes, found: list[dict], lost: list[dict], costs: dict, cost: float,
         silent: list[str]) -> dict:
    args = config.get("args") or []
    return {"HyperParameters": {k.lstrip("-"): v for k, v in zip(args[::2], args[1::2])}, "cost_usd": cost,
            "never_checked_in": silent,
            "markers": marks, "nodes": nodes,
            "instances": [{"instance_id": i["InstanceId"], "state": i["State"]["Name"],
                           "availability_zone": i["Placement"]["AvailabilityZone"],
                           "private_ip": i.get("PrivateIpAddress"),
                           "lifecycle": i.get("InstanceLifecycle", "on-demand"),
                           "launched": i["LaunchTime"].timestamp(), "cost_usd": round(costs[i["InstanceId"]], 6),
                           "interrupted": interrupted(i), "tags": tag_map(i)} for i in found],
            "interruptions": [{"instance_id": i["InstanceId"], "cost_usd": round(costs[i["InstanceId"]], 6)}
                              for i in lost],
            "replacements": replacements(marks)}


def replacements(marks: dict) -> list[dict]:
    """The replacements the job's survivors (bootstrap/replacement.py) or `watch --recover` recorded, in order:
    status/replaced-<k> holds {instance_ids, market, availability_zone, tries, at, by, hourly_usd_per_node}."""
    import json

    found = []
    for name, text in marks.items():
        if re.fullmatch(r"replaced-\d+", name):
            try:
                found.append({"replacement": int(name.split("-")[1]), **json.loads(text)})
            except ValueError:
                continue  # not ours: written by hand
    return sorted(found, key=lambda r: r["replacement"])


def describe(client_for, job_id: str, region: str) -> JobView:
    ec2, now = client_for("ec2", region), time.time()
    found = sorted(instances(ec2, job_id), key=lambda i: i["LaunchTime"])
    config = job_config(ec2, job_id)
    marks = markers(client_for("s3", region), job_id, *bucket_of(client_for, region, config))
    nodes = int(config.get("nnodes") or 0) or None
    alive = [i for i in found if i["State"]["Name"] in LIVE_STATES and tag_map(i).get(STATE_TAG) != "interrupted"]
    lost = [i for i in found if interrupted(i)]
    costs = instance_costs(ec2, found, region, now)
    status, secondary, failure = _status(marks, found, alive, nodes, job_id)
    silent = never_checked_in(client_for("logs", region), job_id, alive, now) if status == "InProgress" else []
    started = found[0]["LaunchTime"].timestamp() if found else None
    ended = None
    if status in ("Completed", "Failed", "Stopped") and found:
        ended = max(max(ended_at(i) or now, i["LaunchTime"].timestamp()) for i in found)
    wall = int((ended or now) - started) if started else None
    cost = round(sum(costs.values()), 6)
    itype = found[0]["InstanceType"] if found else None
    market = config.get("market") or (("spot" if found[0].get("InstanceLifecycle") == "spot" else "on-demand")
                                      if found else None)
    transitions = [Transition("Launched", started, None, f"{len(found)} instances so far")] if started else []
    transitions += [Transition("Interrupted", i["LaunchTime"].timestamp(), None,
                               f"{i['InstanceId']} in {i['Placement']['AvailabilityZone']}, "
                               f"${costs.get(i['InstanceId'], 0):.4f}") for i in lost]
    transitions.append(Transition(secondary, None, None, ""))
    return JobView(job_id=job_id, platform=PLATFORM, region=region, status=status, secondary_status=secondary,
                   transitions=tuple(transitions), hosts=tuple(i["InstanceId"] for i in alive),
                   training_seconds=wall, billable_seconds=_billable(region, itype, nodes, wall, cost),
                   interruptions=len(lost), failure_reason=failure, instance_type=itype, count=nodes,
                   market=market, started_at=started, ended_at=ended,
                   on_demand_usd=on_demand_equivalent(found, region, now) if found else None,
                   raw=_raw(config, marks, nodes, found, lost, costs, cost, silent))


def log_source(job_id: str) -> logtail.LogSource:
    # One stream per instance, named by its id; every stream is a host of the job.
    return logtail.LogSource(group=log_group(job_id), prefix="", host_of=lambda stream: stream,
                             live_streams=len)


def logs(client_for, job_id: str, region: str, cursor: dict | None) -> tuple[list[LogLine], dict]:
    return logtail.tail(client_for("logs", region), log_source(job_id), cursor)


def mark_stopped(client_for, job_id: str, region: str) -> bool:
    """Write the job's stop mark (s3://<bucket>/<job>/status/stopped): the nodes end their run at it and
    `watch --recover` launches nothing once it is there. False when there is no bucket to hold it (a launch
    that failed before the bucket existed: nothing can be running)."""
    from trainctl.aws import clients as aws

    bucket, account = bucket_of(client_for, region, job_config(client_for("ec2", region), job_id))
    try:
        client_for("s3", region).put_object(Bucket=bucket, Key=layout.status_key(job_id, "stopped"),
                                            Body=f"stopped by trainctl at {time.time():.0f}".encode(),
                                            **layout.owner(account))
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) == "NoSuchBucket":
            return False
        raise
    return True


def stop_marked(client_for, job_id: str, region: str, config: dict | None = None) -> bool:
    """Whether the job carries its stop mark now (read fresh, not from an earlier describe)."""
    bucket, account = bucket_of(client_for, region, config if config is not None
                                else job_config(client_for("ec2", region), job_id))
    return "stopped" in markers(client_for("s3", region), job_id, bucket, account)

