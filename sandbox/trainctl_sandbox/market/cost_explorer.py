"""Cost Explorer (boto3 `ce`): GetCostAndUsage, ListCostAllocationTags, UpdateCostAllocationTagsStatus.

moto's `ce` has cost categories and a GetCostAndUsage that answers whatever a test queued beforehand; the
sandbox answers from what its resources did instead, so a bill follows from the sandbox's own prices:
- an EC2 instance is billed from its LaunchTime to the end EC2 wrote in its StateTransitionReason (or now),
  a Spot one at the Spot price in force each second (the same history DescribeSpotPriceHistory answers,
  spot_prices.py; EC2 bills Spot per second at the price in force, EC2 User Guide "Billing for interrupted
  Spot Instances"/"Spot Instance pricing"), an On-Demand one at the catalog's On-Demand price;
- a SageMaker training job that ended is billed BillableTimeInSeconds x instance count x the catalog's
  SageMaker On-Demand price (managed Spot's discount is in the billable seconds, billing.py), spread evenly
  over its training time.
Nothing else is billed here (no EBS, S3, NAT or transfer): the sandbox has no price for them.

AWS's rules kept: a user-defined tag shows in ListCostAllocationTags once a resource carries it, Inactive until
UpdateCostAllocationTagsStatus activates it; a Filter or GroupBy on a tag sees only costs incurred while the tag
was active (AWS Billing User Guide, "Activating user-defined cost allocation tags": tags apply from activation;
backfill is a separate request); a tag group is keyed "key$value", and costs without the tag under "key$".
TimePeriod's End is exclusive and must be after Start (Cost Explorer API Reference, DateInterval).
Not simulated: the up to 24 hours before AWS refreshes the data (docs/cost-model.md says so).
"""
from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

from trainctl.catalog import load_catalog
from trainctl_sandbox.server.context import SandboxContext
from trainctl_sandbox.server.protocol import AwsCall, AwsError

SERVICE = "ce"
# Every cost metric is the same here: one account, no discounts, credits or reservations.
COST_METRICS = ("UnblendedCost", "BlendedCost", "NetUnblendedCost", "AmortizedCost", "NetAmortizedCost")
SERVICES = {"ec2": "Amazon Elastic Compute Cloud - Compute", "sagemaker": "Amazon SageMaker"}

Usage = tuple[dict[str, str], str, float, float, Callable[[float, float], float]]  # tags, service, start, end, $
# service -> its billed usage, registered by the service's extension (process-wide, like moto's backends)
_USAGE: dict[str, Callable[[SandboxContext], list[Usage]]] = {}


def _state(ctx: SandboxContext) -> dict:
    return ctx.state.setdefault(__name__, {"active": {}})  # tag key -> activated at (epoch)


def reset(ctx: SandboxContext) -> None:
    ctx.state.pop(__name__, None)


def epoch(value: Any) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp()
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def _ended(instance: Any, now: float) -> float:
    """When EC2 says the instance ended: the time in its StateTransitionReason ("... (YYYY-MM-DD hh:mm:ss GMT)")."""
    import re

    if instance._state.name not in ("shutting-down", "terminated", "stopping", "stopped"):
        return now
    m = re.search(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:GMT|UTC)\)", instance._reason or "")
    if not m:
        return float(int(epoch(instance.launch_time)))
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()


def integrate(points: list[tuple[float, float]], start: float, end: float) -> float:
    """$ of a step function of (time, $/h) from start to end."""
    if end <= start or not points:
        return 0.0
    price, t0, total = next((p for t, p in reversed(points) if t <= start), points[0][1]), start, 0.0
    for t, p in points:
        if start < t < end:
            total += (t - t0) / 3600 * price
            t0, price = t, p
    return total + (end - t0) / 3600 * price


def _spot_points(ctx: SandboxContext, region: str, itype: str, az: str, start: float, end: float):
    from trainctl_sandbox.market import spot_prices

    records = spot_prices.history(ctx, region, datetime.fromtimestamp(start - 86400, timezone.utc),
                                  datetime.fromtimestamp(end, timezone.utc), [itype], ["Linux/UNIX"], {}, az)
    # the price as DescribeSpotPriceHistory states it (six decimals), not the model's unrounded one
    return sorted((r["Timestamp"].timestamp(), float(r["SpotPrice"])) for r in records)


def _instance_usage(ctx: SandboxContext, now: float) -> list[Usage]:
    from moto.ec2.models import ec2_backends

    out: list[Usage] = []
    catalog = load_catalog()
    for region in ctx.regions:
        backend = ec2_backends[ctx.account_id][region]
        for inst in backend.all_instances():
            start = float(int(epoch(inst.launch_time)))  # to the second, as EC2 states LaunchTime
            end = max(start, _ended(inst, now))
            tags = {t["key"]: t["value"] for t in backend.describe_tags(filters={"resource-id": [inst.id]})}
            if inst.lifecycle == "spot":
                points = _spot_points(ctx, region, inst.instance_type, inst.availability_zone, start, end)
                rate = (lambda a, b, pts=points: integrate(pts, a, b))
            else:
                price = catalog.on_demand_price("ec2", region, inst.instance_type)
                hourly = price.usd_per_hour if price else 0.0
                rate = (lambda a, b, h=hourly: max(0.0, b - a) / 3600 * h)
            out.append((tags, "ec2", start, end, rate))
    return out


def bill(service: str, usage: Callable[[SandboxContext], list[Usage]]) -> None:
    """Bill what another part of the sandbox runs (SageMaker's jobs: sagemaker/billing.py), without this
    module importing it: the service's own extension registers its usage when it is installed."""
    _USAGE[service] = usage


def _usage(ctx: SandboxContext, now: float) -> list[Usage]:
    return _instance_usage(ctx, now) + [u for usage in list(_USAGE.values()) for u in usage(ctx)]


def _periods(start: str, end: str, granularity: str) -> list[tuple[datetime, datetime]]:
    try:
        a, b = (datetime.strptime(x, "%Y-%m-%d").replace(tzinfo=timezone.utc) for x in (start, end))
    except ValueError as e:
        raise AwsError("ValidationException", f"Invalid date: {e}") from None
    if b <= a:
        raise AwsError("ValidationException", "Start date (and hour) should be before end date (and hour)")
    if granularity == "HOURLY":  # opt-in on AWS, with its own limits: not simulated
        raise AwsError("ValidationException", "Hourly granularity is not enabled for this account")
    out, t = [], a
    while t < b:
        if granularity == "MONTHLY":
            nxt = (t.replace(day=1) + timedelta(days=32)).replace(day=1)
        else:
            nxt = t + timedelta(days=1)
        out.append((t, min(nxt, b)))
        t = nxt
    return out


def _tag_filter(flt: dict | None) -> tuple[str, set[str]] | None:
    if not flt:
        return None
    if set(flt) != {"Tags"}:
        raise AwsError("ValidationException", f"the sandbox's Cost Explorer filters by Tags only, not {sorted(flt)}")
    tags = flt["Tags"]
    if any(m not in ("EQUALS",) for m in tags.get("MatchOptions") or ["EQUALS"]):
        raise AwsError("ValidationException", "the sandbox's Cost Explorer matches tag values with EQUALS only")
    return tags["Key"], set(tags.get("Values") or [])


def _groups(group_by: list[dict]) -> list[dict]:
    if len(group_by) > 2:
        raise AwsError("ValidationException", "GroupBy accepts at most 2 groupings")
    for g in group_by:
        if g["Type"] == "DIMENSION" and g["Key"] != "SERVICE" or g["Type"] not in ("TAG", "DIMENSION"):
            raise AwsError("ValidationException", f"the sandbox groups by TAG or DIMENSION SERVICE, not {g}")
    return group_by


def _pieces(usage: Usage, key: str | None, active: dict, a: float, b: float) -> list[tuple[str | None, float]]:
    """(the value of `key` the cost is attributed to, $) of one usage within [a, b): the part before the tag's
    activation carries no value for it."""
    tags, _, start, end, rate = usage
    lo, hi = max(a, start), min(b, end)
    if hi <= lo:
        return []
    if key is None:
        return [(None, rate(lo, hi))]
    since = active.get(key)
    if since is None or key not in tags:
        return [(None, rate(lo, hi))]
    cut = min(max(since, lo), hi)
    return [(None, rate(lo, cut)), (tags[key], rate(cut, hi))]


def get_cost_and_usage(ctx: SandboxContext, call: AwsCall, params: dict) -> dict:
    period, now = params["TimePeriod"], time.time()
    metrics = params.get("Metrics") or []
    for m in metrics:
        if m not in COST_METRICS:
            raise AwsError("ValidationException", f"the sandbox's Cost Explorer has the cost metrics "
                                                  f"{', '.join(COST_METRICS)}, not {m}")
    flt, group_by = _tag_filter(params.get("Filter")), _groups(params.get("GroupBy") or [])
    tag_key = next((g["Key"] for g in group_by if g["Type"] == "TAG"), None)
    if flt and tag_key and flt[0] != tag_key:
        raise AwsError("ValidationException", "the sandbox's Cost Explorer groups and filters by one tag key")
    key = tag_key or (flt[0] if flt else None)
    active = dict(_state(ctx)["active"])
    usage = _usage(ctx, now)
    results = []
    for a, b in _periods(period["Start"], period["End"], params.get("Granularity") or "MONTHLY"):
        sums: dict[tuple[str, ...], float] = {}
        for u in usage:
            for value, dollars in _pieces(u, key, active, a.timestamp(), b.timestamp()):
                if flt and (value is None or value not in flt[1]):
                    continue  # costs before the tag's activation, or of other values, do not match its filter
                keys = tuple(f"{tag_key}${value or ''}" if g["Type"] == "TAG" else SERVICES[u[1]] for g in group_by)
                sums[keys] = sums.get(keys, 0.0) + dollars
        results.append(_result(a, b, now, metrics, sums, bool(group_by)))
    return {"GroupDefinitions": group_by, "ResultsByTime": results, "DimensionValueAttributes": []}


def _amounts(metrics: list[str], dollars: float) -> dict:
    return {m: {"Amount": f"{dollars:.10f}", "Unit": "USD"} for m in metrics}


def _result(a: datetime, b: datetime, now: float, metrics: list[str], sums: dict, grouped: bool) -> dict:
    out: dict[str, Any] = {"TimePeriod": {"Start": a.strftime("%Y-%m-%d"), "End": b.strftime("%Y-%m-%d")},
                           "Estimated": b.timestamp() > now - 86400}  # the newest day is still being refreshed
    if grouped:
        out["Total"], out["Groups"] = {}, [{"Keys": list(k), "Metrics": _amounts(metrics, v)}
                                           for k, v in sorted(sums.items())]
    else:
        out["Total"], out["Groups"] = _amounts(metrics, sum(sums.values())), []
    return out


def _tag_keys(ctx: SandboxContext) -> dict[str, float]:
    """User-defined tag keys the sandbox's resources carry -> when last seen (now: they are there)."""
    now = time.time()
    keys: dict[str, float] = {}
    for tags, *_ in _usage(ctx, now):
        for k in tags:
            if not k.startswith("aws:"):
                keys[k] = now
    return keys


def list_cost_allocation_tags(ctx: SandboxContext, call: AwsCall, params: dict) -> dict:
    active = _state(ctx)["active"]
    keys = set(_tag_keys(ctx)) | set(active)
    wanted = set(params.get("TagKeys") or []) or keys
    if params.get("Type") == "AWSGenerated":
        return {"CostAllocationTags": []}
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    tags = [{"TagKey": k, "Type": "UserDefined", "Status": "Active" if k in active else "Inactive",
             "LastUpdatedDate": today, "LastUsedDate": today} for k in sorted(keys & wanted)]
    if params.get("Status"):
        tags = [t for t in tags if t["Status"] == params["Status"]]
    return {"CostAllocationTags": tags}


def update_cost_allocation_tags_status(ctx: SandboxContext, call: AwsCall, params: dict) -> dict:
    state, known, errors = _state(ctx), _tag_keys(ctx), []
    for item in params["CostAllocationTagsStatus"]:
        key = item["TagKey"]
        if key not in known and key not in state["active"]:
            errors.append({"TagKey": key, "Code": "TagKeysNotFoundException",
                           "Message": f"Failed to update cost allocation tag {key}: tag key not found"})
        elif item["Status"] == "Active":
            state["active"].setdefault(key, time.time())
        else:
            state["active"].pop(key, None)
    return {"Errors": errors}


JSON_OPERATIONS = {
    (SERVICE, "GetCostAndUsage"): get_cost_and_usage,
    (SERVICE, "ListCostAllocationTags"): list_cost_allocation_tags,
    (SERVICE, "UpdateCostAllocationTagsStatus"): update_cost_allocation_tags_status,
}
