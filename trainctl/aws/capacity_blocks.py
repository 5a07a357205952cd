"""EC2 Capacity Block offerings for the plan (DescribeCapacityBlockOfferings), cached like prices.

Asked after a first ranking, for the layouts whose type AWS sells as blocks (planner/capacity_blocks.py): each EC2
On-Demand option's type, node count and Region, for the shortest block that holds its hours, starting between now
and the spec's deadline (or AWS's eight weeks ahead). A call that fails is a warning; the plan keeps its other
options. Buying is `purchase`, which only `launch --buy-capacity-block` calls, after its own confirmation;
`held_blocks` reads the blocks the account already bought (a re-run never buys twice).
"""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

from trainctl.aws import clients as aws
from trainctl.aws.disk_cache import DiskCache, cached, caller_account
from trainctl.aws.workers import interruptible_pool
from trainctl.naming.tags import JOB_TAG, SPEC_TAG
from trainctl.planner import capacity_blocks as blocks
from trainctl.planner.quotes import BlockOffer, Quotes
from trainctl.plans import Option

MAX_AHEAD = timedelta(weeks=8)   # a block may start up to eight weeks ahead (EC2 User Guide)
ASKED_PER_PLAN = 10              # layouts asked per plan: the best-ranked On-Demand ones, as the table shows


def _offerings(region: str, instance_type: str, count: int, duration_h: int, start: datetime,
               end: datetime) -> list[dict]:
    ec2 = aws.client("ec2", region)
    out: list[dict] = []
    kwargs = {"InstanceType": instance_type, "InstanceCount": count, "CapacityDurationHours": duration_h,
              "StartDateRange": start, "EndDateRange": end}
    for _ in range(10):  # AWS returns a handful; a bounded number of pages whatever the endpoint says
        page = ec2.describe_capacity_block_offerings(**kwargs)
        out += [{"id": o["CapacityBlockOfferingId"], "az": o["AvailabilityZone"], "count": int(o["InstanceCount"]),
                 "start": o["StartDate"].astimezone(timezone.utc).isoformat(),
                 "end": o["EndDate"].astimezone(timezone.utc).isoformat(),
                 "hours": int(o.get("CapacityBlockDurationHours") or 0) + int(o.get("CapacityBlockDurationMinutes") or 0) / 60,
                 "fee": float(o["UpfrontFee"]), "currency": o.get("CurrencyCode", "USD")}
                for o in page.get("CapacityBlockOfferings", [])]
        if not page.get("NextToken"):
            break
        kwargs["NextToken"] = page["NextToken"]
    return out


def wanted(ranking: list[Option], platform: str = "ec2") -> list[tuple[str, str, int, int]]:
    """(region, type, count, duration hours) to ask: the best-ranked On-Demand layouts of `platform` whose type AWS
    reserves (EC2: Capacity Blocks; SageMaker: training plans, aws/training_plans.py)."""
    out: list[tuple[str, str, int, int]] = []
    for o in ranking:
        if o.platform != platform or o.market != "on-demand" or not blocks.offered_for(o.instance_type, o.count):
            continue
        duration = blocks.duration_to_ask(o.hours)
        key = (o.region, o.instance_type, o.count, duration)
        if duration is not None and key not in out:
            out.append(key)
    return out[:ASKED_PER_PLAN]


def with_block_offers(quotes: Quotes, ranking: list[Option], deadline_hours: float | None,
                      refresh: bool = False, now: datetime | None = None) -> Quotes:
    """`quotes` with the Capacity Block offers of the ranking's block layouts; the same quotes when none is asked."""
    asks = wanted(ranking)
    if not asks:
        return quotes
    now = now or datetime.now(timezone.utc)
    # EndDateRange bounds a block's end; the deadline bounds the job's: a block may end after the deadline, so
    # the range is the latest start (the deadline, or AWS's eight weeks) plus the block's own duration.
    latest_start = now + (min(timedelta(hours=deadline_hours), MAX_AHEAD) if deadline_hours else MAX_AHEAD)
    try:
        cache = DiskCache(caller_account(asks[0][0]), refresh=refresh)
    except Exception:  # noqa: BLE001 - without the account there is no cache to share; the asks say what failed
        cache = DiskCache("", ttl_s=0)
    found: dict[tuple[str, str, int], tuple[BlockOffer, ...]] = {}
    warnings: list[str] = []
    with interruptible_pool(8) as pool:
        jobs = {a: pool.submit(cached, cache, {"op": "blocks", "region": a[0], "type": a[1], "count": a[2],
                                               "hours": a[3], "hour": now.strftime("%Y-%m-%dT%H"),
                                               "deadline": deadline_hours},
                               lambda a=a: _offerings(a[0], a[1], a[2], a[3], now,
                                                      latest_start + timedelta(hours=a[3]))) for a in asks}
        for (region, itype, count, _), fut in jobs.items():
            try:
                raw = fut.result()
            except Exception as e:  # noqa: BLE001 - a failed ask is a warning: the plan keeps Spot and On-Demand
                warnings.append(f"{region}: DescribeCapacityBlockOfferings for {count} x {itype} failed "
                                f"({aws.error_summary(e)}); no capacity block is offered there")
                continue
            offers = tuple(_offer(o, now) for o in raw if o["currency"] == "USD")
            if offers:
                found[(region, itype, count)] = offers
    for region, itype, count, _ in asks:  # what the account already holds: asked fresh, never cached
        try:
            held = _held_offers(region, itype, count, now)
        except Exception as e:  # noqa: BLE001 - a failed read is a warning: the offers still stand
            warnings.append(f"{region}: DescribeCapacityReservations failed ({aws.error_summary(e)}); blocks the "
                            "account holds are not offered")
            continue
        if held:
            found[(region, itype, count)] = held + found.get((region, itype, count), ())
    return replace(quotes, capacity_blocks={**quotes.capacity_blocks, **found},
                   warnings=quotes.warnings + tuple(warnings))


def _held_offers(region: str, itype: str, count: int, now: datetime) -> tuple[BlockOffer, ...]:
    """The blocks of `itype` the account holds with room for `count` nodes, as offers whose fee is already paid."""
    return held_as_offers(held_blocks(region, itype), count, now)


def held_as_offers(reservations: list[dict], count: int, now: datetime) -> tuple[BlockOffer, ...]:
    """Held reservations (EC2 Capacity Reservation shape; a SageMaker training plan is read into it) with room for
    `count` nodes, as offers whose fee is already paid: the hours left from now (or from the start), the instances
    free (all of them before the start)."""
    out = []
    for r in reservations:
        start, end = r["StartDate"].astimezone(timezone.utc), r["EndDate"].astimezone(timezone.utc)
        free = int(r["AvailableInstanceCount"] if r["State"] == "active" else r["TotalInstanceCount"])
        if free < count:
            continue
        out.append(BlockOffer(offering_id=r["CapacityReservationId"], availability_zone=r["AvailabilityZone"],
                              instance_count=free, start=start.isoformat(), end=end.isoformat(),
                              duration_hours=(end - max(now, start)).total_seconds() / 3600,
                              wait_hours=max(0.0, (start - now).total_seconds() / 3600), upfront_fee_usd=0.0,
                              reservation_id=r["CapacityReservationId"]))
    return tuple(out)


def _offer(raw: dict, now: datetime) -> BlockOffer:
    start = datetime.fromisoformat(raw["start"])
    return BlockOffer(offering_id=raw["id"], availability_zone=raw["az"], instance_count=raw["count"],
                      start=raw["start"], end=raw["end"], duration_hours=raw["hours"],
                      wait_hours=max(0.0, (start - now).total_seconds() / 3600), upfront_fee_usd=raw["fee"])


def purchase_params(offering_id: str, job_id: str, spec_name: str) -> dict:
    """PurchaseCapacityBlock's request: the Capacity Reservation it becomes carries the job's and the spec's tags
    (the spec's lets a later launch of the same spec find the block instead of buying another)."""
    return {"CapacityBlockOfferingId": offering_id, "InstancePlatform": "Linux/UNIX",
            "TagSpecifications": [{"ResourceType": "capacity-reservation",
                                   "Tags": [{"Key": JOB_TAG, "Value": job_id}, {"Key": SPEC_TAG, "Value": spec_name}]}]}


def purchase(region: str, params: dict) -> dict:
    """Buy the offer (cannot be undone): the Capacity Reservation it becomes."""
    return aws.client("ec2", region).purchase_capacity_block(**params)["CapacityReservation"]


HELD_STATES = ("active", "scheduled")


def held_blocks(region: str, instance_type: str, spec_name: str | None = None) -> list[dict]:
    """The account's Capacity Blocks of `instance_type` in `region` that are still to come or running (with the
    spec's tag when `spec_name` is given): DescribeCapacityReservations, capacity-block reservations only."""
    # (DescribeCapacityReservations documents no tag: filter, so the spec's tag is matched here)
    filters = [{"Name": "instance-type", "Values": [instance_type]}, {"Name": "state", "Values": list(HELD_STATES)}]
    ec2, out, kwargs = aws.client("ec2", region), [], {"Filters": filters}
    for _ in range(10):  # bounded pages whatever the endpoint says
        page = ec2.describe_capacity_reservations(**kwargs)
        out += [r for r in page.get("CapacityReservations", []) if r.get("ReservationType") == "capacity-block"
                and (spec_name is None or {"Key": SPEC_TAG, "Value": spec_name} in r.get("Tags", []))]
        if not page.get("NextToken"):
            break
        kwargs["NextToken"] = page["NextToken"]
    return out
