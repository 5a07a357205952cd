"""The On-Demand Capacity Reservations the account holds, for the plan (DescribeCapacityReservations).

Asked after a first ranking, once per Region of its EC2 On-Demand layouts, fresh on every plan (what the account holds
changes under it; never cached). Kept: reservations the account owns (OwnerId: a shared one bills its consumer for
the instances it runs, so it is not sunk to this account), `active` (launches go only into an active one), of
ReservationType `default` (a Capacity Block is offered by aws/capacity_blocks.py), for `Linux/UNIX` on `default`
tenancy (trainctl's nodes: an instance runs in a reservation only if its type, platform, AZ and tenancy match; EC2
User Guide, "Launch instances into an existing Capacity Reservation"). A failed read is a warning; the plan keeps its
other options. planner/capacity_reservations.py turns them into options.
"""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

from trainctl.aws import clients as aws
from trainctl.aws.disk_cache import caller_account
from trainctl.planner.quotes import HeldReservation, Quotes
from trainctl.plans import Option

PLATFORM = "Linux/UNIX"   # trainctl's AMIs (DescribeCapacityReservations: InstancePlatform)
TENANCY = "default"       # trainctl launches on shared tenancy (launch templates name no tenancy)
PAGES = 10                # bounded pages whatever the endpoint says


def regions_to_ask(ranking: list[Option]) -> list[str]:
    """The Regions of the ranking's EC2 On-Demand layouts of one type (a flexible layout takes no reservation)."""
    out: list[str] = []
    for o in ranking:
        if o.platform == "ec2" and o.market == "on-demand" and not o.flexible_group and o.region not in out:
            out.append(o.region)
    return out


def _usable(r: dict, account: str) -> bool:
    return (r.get("OwnerId") == account and r.get("State") == "active"
            and r.get("ReservationType", "default") == "default" and r.get("InstancePlatform") == PLATFORM
            and r.get("Tenancy", TENANCY) == TENANCY)


def held(region: str, account: str, now: datetime) -> dict[tuple[str, str], tuple[HeldReservation, ...]]:
    """`account`'s usable reservations in `region`, by (region, instance type)."""
    ec2 = aws.client("ec2", region)
    kwargs = {"Filters": [{"Name": "state", "Values": ["active"]}, {"Name": "owner-id", "Values": [account]}]}
    found: dict[tuple[str, str], list[HeldReservation]] = {}
    for _ in range(PAGES):
        page = ec2.describe_capacity_reservations(**kwargs)
        for r in page.get("CapacityReservations", []):
            if not _usable(r, account):
                continue
            end = r.get("EndDate") if r.get("EndDateType") == "limited" else None
            end = end.astimezone(timezone.utc) if end is not None else None
            found.setdefault((region, r["InstanceType"]), []).append(HeldReservation(
                reservation_id=r["CapacityReservationId"], availability_zone=r["AvailabilityZone"],
                available=int(r.get("AvailableInstanceCount", 0)), total=int(r.get("TotalInstanceCount", 0)),
                match=r.get("InstanceMatchCriteria", "open"), end=end.isoformat() if end else None,
                hours_left=(end - now).total_seconds() / 3600 if end else None))
        if not page.get("NextToken"):
            break
        kwargs["NextToken"] = page["NextToken"]
    # the most room first: a layout takes the first that fits
    return {k: tuple(sorted(v, key=lambda h: -h.available)) for k, v in found.items()}


def with_held_reservations(quotes: Quotes, ranking: list[Option], now: datetime | None = None) -> Quotes:
    """`quotes` with the account's On-Demand Capacity Reservations in the ranking's EC2 On-Demand Regions."""
    regions = regions_to_ask(ranking)
    if not regions:
        return quotes
    now = now or datetime.now(timezone.utc)
    found: dict[tuple[str, str], tuple[HeldReservation, ...]] = {}
    warnings: list[str] = []
    account = None
    for region in regions:
        try:
            account = account or caller_account(region)
            found.update(held(region, account, now))
        except Exception as e:  # noqa: BLE001 - a failed read is a warning: the plan keeps its other options
            warnings.append(f"{region}: DescribeCapacityReservations failed ({aws.error_summary(e)}); the account's "
                            "On-Demand Capacity Reservations there are not offered")
    if not found and not warnings:
        return quotes
    return replace(quotes, capacity_reservations={**quotes.capacity_reservations, **found},
                   warnings=quotes.warnings + tuple(warnings))
