"""EC2 Capacity Blocks for ML: `DescribeCapacityBlockOfferings` and `PurchaseCapacityBlock` (moto has neither).

Offers follow AWS's rules (EC2 User Guide, "Capacity Blocks for ML" and "Find and purchase Capacity Blocks";
docs/aws-rules.md): only the types and Regions AWS lists, 1 to 64 instances, durations in 1-day steps up to
14 days and 7-day steps up to 182 days, a start at most eight weeks ahead, inside the asked date range. Each
offer's AZ, start and fee are a function of (seed, type, Region, count, duration): the fee is the catalog's
On-Demand price for the block's instance-hours times a seeded factor. A test steers them with the admin action
`set_capacity_blocks` ({"fee_factor": x, "start_in_hours": [h, ...], "offered": false}); `capacity_blocks` lists
what each account bought. A purchase becomes a targeted Capacity Reservation of type capacity-block, scheduled
until its start, active until its end, then expired (DescribeCapacityReservations reads each state from the clock);
`start_capacity_block` ({"reservation_id": id}) moves a bought block's dates so that it starts now (time passing);
`end_capacity_block` ends it now and terminates the instances in it, as EC2 does at a block's end;
`end_capacity_block` with `in_seconds` only moves its end to that many seconds from now (a test brings the end near
without waiting a day; the instances run on until a later `end_capacity_block`).
"""
from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone

from trainctl.catalog import load_catalog
from trainctl_sandbox.server import backend_lock, ec2_actions, ec2_data
from trainctl_sandbox.market import model as market_model
from trainctl_sandbox.server.context import SandboxContext
from trainctl_sandbox.server.protocol import AwsError

# Types and Regions AWS sells blocks in (EC2 User Guide, "Capacity Blocks for ML": supported instance types and
# Regions) that the sandbox's catalog also prices.
BLOCK_REGIONS = {"p5.48xlarge": ("us-east-1", "us-east-2", "us-west-2", "ap-northeast-1"),
                 "p5e.48xlarge": ("us-east-2",), "p4d.24xlarge": ("us-east-2", "us-west-2", "us-east-1"),
                 "trn1.32xlarge": ("ap-southeast-4", "us-east-1")}
MAX_INSTANCES = 64
MAX_AHEAD = timedelta(weeks=8)
OFFERS_PER_ASK = 3            # AWS shows up to six; three starts a day apart are enough to choose between
DEFAULT_FIRST_START_H = (2, 30)  # the seeded first start lies this many hours ahead (range)


def install(ctx: SandboxContext) -> None:
    ec2_actions.define("DescribeCapacityBlockOfferings", ctx, describe_offerings)
    ec2_actions.define("PurchaseCapacityBlock", ctx, purchase)
    ec2_actions.define("DescribeCapacityReservations", ctx, describe_reservations)


def _state(ctx: SandboxContext) -> dict:
    return ctx.state.setdefault(__name__, {"fee_factor": 1.0, "start_in_hours": None, "offered": True,
                                           "offers": {}, "bought": {}})


def store(ctx: SandboxContext) -> dict[str, list[dict]]:
    """Every account's Capacity Reservations: the blocks bought here and the On-Demand Capacity Reservations made
    with ec2/capacity_reservations.py (ReservationType `default`)."""
    return _state(ctx)["bought"]


def reset(ctx: SandboxContext) -> None:
    ctx.state.pop(__name__, None)


def set_capacity_blocks(ctx: SandboxContext, payload: dict) -> dict:
    state = _state(ctx)
    if "fee_factor" in payload:
        if float(payload["fee_factor"]) <= 0:
            raise ValueError("fee_factor must be > 0")
        state["fee_factor"] = float(payload["fee_factor"])
    if "start_in_hours" in payload:
        state["start_in_hours"] = [float(h) for h in payload["start_in_hours"]] if payload["start_in_hours"] else None
    if "offered" in payload:
        state["offered"] = bool(payload["offered"])
    return {k: state[k] for k in ("fee_factor", "start_in_hours", "offered")}


def capacity_blocks(ctx: SandboxContext, payload: dict) -> dict:
    return {"bought": {a: [dict(r, StartDate=r["StartDate"].isoformat(), EndDate=r["EndDate"].isoformat())
                           for r in rs] for a, rs in _state(ctx)["bought"].items()}}


def start_capacity_block(ctx: SandboxContext, payload: dict) -> dict:
    """Time passes for one bought block: its start moves to now, its end by as much (its duration kept)."""
    rid = payload.get("reservation_id")
    held = next((b for rs in _state(ctx)["bought"].values() for b in rs if b["CapacityReservationId"] == rid), None)
    if held is None:
        raise ValueError(f"no bought block {rid!r}")
    shift = datetime.now(timezone.utc).replace(microsecond=0) - held["StartDate"]
    held["StartDate"], held["EndDate"] = held["StartDate"] + shift, held["EndDate"] + shift
    return {"StartDate": held["StartDate"].isoformat(), "EndDate": held["EndDate"].isoformat()}


def _check_duration(hours: int) -> None:
    daily = hours % 24 == 0 and 24 <= hours <= 14 * 24
    weekly = hours % (7 * 24) == 0 and 14 * 24 < hours <= 182 * 24
    if not (daily or weekly):
        raise AwsError("InvalidParameterValue", f"The CapacityDurationHours {hours} is not valid. Specify the duration "
                                                "in 1-day increments up to 14 days, and in 7-day increments up to "
                                                "182 days.")


def _utc(t: datetime | None, default: datetime) -> datetime:
    if t is None:
        return default
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


def offers(ctx: SandboxContext, region: str, itype: str, count: int, hours: int, earliest: datetime,
           latest: datetime, now: datetime) -> list[dict]:
    state = _state(ctx)
    if not state["offered"] or region not in BLOCK_REGIONS.get(itype, ()):
        return []
    zones = [(name, zid) for name, zid in ec2_data.zones(region) if ec2_data.offered(itype, region, zid)]
    price = load_catalog().on_demand_price("ec2", region, itype)
    if not zones or price is None:
        return []
    base = max(earliest, now).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    lo, hi = DEFAULT_FIRST_START_H
    first = lo + round((hi - lo) * market_model.noise(ctx.seed, "block-start", itype, region, count, hours))
    starts = ([now + timedelta(hours=h) for h in state["start_in_hours"]] if state["start_in_hours"] is not None
              else [base + timedelta(hours=first + 24 * k) for k in range(OFFERS_PER_ASK)])
    out = []
    for k, start in enumerate(starts):
        start = start.replace(second=0, microsecond=0)
        end = start + timedelta(hours=hours)
        if start < earliest.replace(second=0, microsecond=0) or end > latest or start > now + MAX_AHEAD:
            continue
        az = zones[int(market_model.noise(ctx.seed, "block-az", itype, region, k) * len(zones))][0]
        factor = (0.85 + 0.3 * market_model.noise(ctx.seed, "block-fee", itype, region, count, hours, k))
        fee = price.usd_per_hour * count * hours * factor * state["fee_factor"]
        oid = "cb-" + hashlib.sha256(repr((region, itype, count, hours, az, start.isoformat(), ctx.seed))
                                     .encode()).hexdigest()[:17]
        offer = {"CapacityBlockOfferingId": oid, "InstanceType": itype, "AvailabilityZone": az,
                 "InstanceCount": count, "StartDate": start, "EndDate": end, "CapacityBlockDurationHours": hours,
                 "CapacityBlockDurationMinutes": 0, "UpfrontFee": f"{fee:.2f}", "CurrencyCode": "USD",
                 "Tenancy": "default"}
        state["offers"][oid] = dict(offer, Region=region)
        out.append(offer)
    return out


def describe_offerings(ctx: SandboxContext, r) -> dict:
    itype = r._get_param("InstanceType")
    count = r._get_param("InstanceCount")
    hours = r._get_param("CapacityDurationHours")
    if not itype or count is None or hours is None:
        raise AwsError("MissingParameter", "InstanceType, InstanceCount and CapacityDurationHours are required.")
    count, hours = int(count), int(hours)
    if not 1 <= count <= MAX_INSTANCES:
        raise AwsError("InvalidParameterValue", f"The InstanceCount {count} is not valid. Each Capacity Block can "
                                                f"have up to {MAX_INSTANCES} instances.")
    _check_duration(hours)
    r.error_on_dryrun()
    now = datetime.now(timezone.utc)
    earliest = _utc(r._get_param("StartDateRange"), now)
    latest = _utc(r._get_param("EndDateRange"), now + MAX_AHEAD + timedelta(hours=hours))
    return {"CapacityBlockOfferings": offers(ctx, r.region, itype, count, hours, earliest, latest, now)}


def purchase(ctx: SandboxContext, r) -> dict:
    oid = r._get_param("CapacityBlockOfferingId")
    platform = r._get_param("InstancePlatform")
    if not oid or not platform:
        raise AwsError("MissingParameter", "CapacityBlockOfferingId and InstancePlatform are required.")
    state = _state(ctx)
    offer = state["offers"].get(oid)
    if offer is None or offer["Region"] != r.region:
        raise AwsError("InvalidCapacityBlockOfferingId.NotFound" if offer is None else "InvalidParameterValue",
                       f"The Capacity Block offering ID '{oid}' does not exist.")
    r.error_on_dryrun()
    now = datetime.now(timezone.utc)
    tags = [t for spec in (r._get_param("TagSpecifications") or []) for t in spec.get("Tags", [])]
    cr_id = "cr-" + hashlib.sha256(f"{oid}{r.current_account}".encode()).hexdigest()[:17]
    reservation = {"CapacityReservationId": cr_id, "InstanceType": offer["InstanceType"],
                   "InstancePlatform": platform, "AvailabilityZone": offer["AvailabilityZone"], "Tenancy": "default",
                   "TotalInstanceCount": offer["InstanceCount"], "AvailableInstanceCount": offer["InstanceCount"],
                   "StartDate": offer["StartDate"], "EndDate": offer["EndDate"], "EndDateType": "limited",
                   "InstanceMatchCriteria": "targeted", "ReservationType": "capacity-block",
                   "State": "active" if offer["StartDate"] <= now else "scheduled", "Tags": tags,
                   "OwnerId": r.current_account, "CreateDate": now}
    del state["offers"][oid]   # an offer is sold once
    state["bought"].setdefault(r.current_account, []).append(
        {k: v for k, v in reservation.items() if k != "CreateDate"} | {"UpfrontFee": offer["UpfrontFee"],
                                                                       "Region": r.region})
    return {"CapacityReservation": reservation}


# ----------------------------------------------------------------------------- what the account holds
def _state_now(held: dict, now: datetime) -> str:
    if held.get("State") == "cancelled":
        return "cancelled"
    if now < held["StartDate"]:
        return "scheduled"
    return "active" if held["EndDate"] is None or now < held["EndDate"] else "expired"


RESERVATION_FILTERS = {"instance-type": "InstanceType", "availability-zone": "AvailabilityZone", "state": "State",
                       "instance-platform": "InstancePlatform", "owner-id": "OwnerId"}


def _matches(reservation: dict, name: str, values: list[str]) -> bool:
    if name not in RESERVATION_FILTERS:
        raise AwsError("InvalidParameterValue", f"The filter '{name}' is invalid")
    return str(reservation.get(RESERVATION_FILTERS[name])) in values


def describe_reservations(ctx: SandboxContext, r) -> dict:
    """The account's Capacity Reservations in the Region (blocks and On-Demand Capacity Reservations), with the
    filters AWS documents for them (DescribeCapacityReservations) and each state as of now; no EndDate on one
    without an end."""
    ids = list(r._get_param("CapacityReservationIds") or [])
    filters = [(f["Name"], list(f.get("Values") or [])) for f in r._get_param("Filters") or []]
    r.error_on_dryrun()
    now = datetime.now(timezone.utc)
    mine = [dict({k: v for k, v in b.items() if k not in ("UpfrontFee", "Region", "InstanceIds") and v is not None},
                 State=_state_now(b, now), AvailableInstanceCount=_available(r.current_account, r.region, b))
            for b in _state(ctx)["bought"].get(r.current_account, []) if b["Region"] == r.region]
    known = {b["CapacityReservationId"] for b in mine}
    for rid in ids:
        if rid not in known:
            raise AwsError("InvalidCapacityReservationId.NotFound", f"The Capacity Reservation ID '{rid}' does not "
                                                                   "exist.")
    out = [b for b in mine if (not ids or b["CapacityReservationId"] in ids)
           and all(_matches(b, name, values) for name, values in filters)]
    return {"CapacityReservations": out}


# ----------------------------------------------------------------------------- launching into a block
def take(ctx: SandboxContext, account: str, region: str, reservation_id: str | None, market: str | None,
         instance_type: str, az: str, count: int, now: datetime | None = None) -> int:
    """Hold `count` of a reservation's instances for a launch that targets it, as EC2 does: only into a reservation
    of this account that matches the type and AZ (and, for an On-Demand Capacity Reservation, shared tenancy and the
    Linux/UNIX platform of the sandbox's AMIs), is active, and has that many left (EC2 User Guide, "Launch instances
    into an existing Capacity Reservation"; "Launch instances using Capacity Blocks"). A block takes the
    capacity-block market only, an On-Demand Capacity Reservation On-Demand only. Returns the count held. Too few
    left: a block's refusal keeps the sandbox's earlier InsufficientInstanceCapacity; an On-Demand Capacity
    Reservation's is ReservationCapacityExceeded (EC2 API Reference, "Error codes": "The targeted Capacity
    Reservation does not [have] enough available instance capacity"). The other codes are the sandbox's choice: the
    guide names the conditions, not the codes."""
    held = _held(ctx, account, region, reservation_id) if reservation_id else None
    block = market == "capacity-block" or (held is not None and held["ReservationType"] == "capacity-block")
    if block and (market != "capacity-block" or not reservation_id):
        raise AwsError("InvalidParameterCombination", "Launching into a Capacity Block requires "
                                                      "InstanceMarketOptions.MarketType capacity-block and "
                                                      "CapacityReservationSpecification.CapacityReservationTarget.")
    if held is None:
        raise AwsError("InvalidCapacityReservationId.NotFound",
                       f"The Capacity Reservation ID '{reservation_id}' does not exist.")
    if not block and market is not None:
        raise AwsError("InvalidParameterCombination", f"The Capacity Reservation {reservation_id} takes On-Demand "
                                                      f"instances; the launch asked the {market} market.")
    if held["InstanceType"] != instance_type or held["AvailabilityZone"] != az:
        raise AwsError("InvalidParameterValue",
                       f"The Capacity Reservation {reservation_id} is for {held['InstanceType']} in "
                       f"{held['AvailabilityZone']}; the launch asked {instance_type} in {az}.")
    if held["InstancePlatform"] != "Linux/UNIX" or held["Tenancy"] != "default":
        raise AwsError("InvalidParameterValue", f"The Capacity Reservation {reservation_id} is for "
                                                f"{held['InstancePlatform']} on {held['Tenancy']} tenancy; the "
                                                "launch is Linux/UNIX on default tenancy.")
    now = now or datetime.now(timezone.utc)
    if _state_now(held, now) != "active":
        end = held["EndDate"].isoformat() if held["EndDate"] else "no end"
        raise AwsError("InvalidParameterValue", f"The Capacity Reservation {reservation_id} is not active "
                                                f"({_state_now(held, now)}: from {held['StartDate'].isoformat()} to "
                                                f"{end}).")
    free = _available(account, region, held)
    if count > free:
        if not block:
            raise AwsError("ReservationCapacityExceeded", f"The targeted Capacity Reservation {reservation_id} does "
                                                          f"not have enough available instance capacity: {free} "
                                                          f"available, {count} asked.")
        raise AwsError("InsufficientInstanceCapacity",
                       f"The Capacity Reservation {reservation_id} has {free} instances available; the launch asked "
                       f"{count}.", 500)
    return count


def record(ctx: SandboxContext, account: str, region: str, reservation_id: str, instance_ids: list[str]) -> None:
    """The instances a launch put into the block: they hold its capacity until they are terminated (EC2 User
    Guide, "Launch instances using Capacity Blocks": a terminated instance's place comes back)."""
    held = _held(ctx, account, region, reservation_id)
    if held is not None:
        held.setdefault("InstanceIds", []).extend(instance_ids)


def _held(ctx: SandboxContext, account: str, region: str, reservation_id: str) -> dict | None:
    return next((b for b in _state(ctx)["bought"].get(account, []) if b["CapacityReservationId"] == reservation_id
                 and b["Region"] == region), None)


def _live(account: str, region: str, held: dict) -> list:
    from moto.ec2.models import ec2_backends

    ids = set(held.get("InstanceIds", []))
    return [i for i in ec2_backends[account][region].all_instances() if i.id in ids and i._state.name != "terminated"]


def _available(account: str, region: str, held: dict) -> int:
    return held["TotalInstanceCount"] - len(_live(account, region, held))


def end_capacity_block(ctx: SandboxContext, payload: dict) -> dict:
    """The block's end comes now: EC2 terminates every instance still in it (EC2 User Guide, "Capacity Blocks for
    ML": "When the Capacity Block expires, every instance in it is terminated"; the state reason's code is the
    sandbox's choice)."""
    from trainctl_sandbox.ec2.interrupts import ended

    rid = payload.get("reservation_id")
    found = [(a, b) for a, rs in _state(ctx)["bought"].items() for b in rs if b["CapacityReservationId"] == rid]
    if not found:
        raise ValueError(f"no bought block {rid!r}")
    account, held = found[0]
    now = datetime.now(timezone.utc).replace(microsecond=0)
    if payload.get("in_seconds") is not None:  # the end brought near, nothing ended yet
        held["EndDate"] = now + timedelta(seconds=float(payload["in_seconds"]))
        return {"terminated": [], "EndDate": held["EndDate"].isoformat()}
    held["StartDate"], held["EndDate"] = min(held["StartDate"], now - timedelta(hours=1)), now
    ended_ids = []
    with backend_lock.EC2:
        for instance in _live(account, held["Region"], held):
            instance.terminate()
            ended(instance, "Server.ScheduledStop", "Capacity Block reservation ended")
            ended_ids.append(instance.id)
    return {"terminated": ended_ids, "EndDate": now.isoformat()}


ADMIN_ACTIONS = {"set_capacity_blocks": set_capacity_blocks, "capacity_blocks": capacity_blocks,
                 "start_capacity_block": start_capacity_block, "end_capacity_block": end_capacity_block}
