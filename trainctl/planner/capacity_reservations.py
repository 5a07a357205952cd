"""On-Demand Capacity Reservations the account holds, as plan options beside Spot, On-Demand and Capacity Blocks.

An ODCR is billed at the On-Demand rate whether instances run in it or not, and an instance that runs in it pays
nothing more for the reservation (EC2 User Guide, "Capacity Reservation pricing and billing"). So while the account
holds it, the instance-hours the job spends inside it cost nothing they would not have cost anyway: the option's
cost is only what the job adds, its hours past the reservation's end (its capacity is released then, EC2 API
Reference CreateCapacityReservation; instances keep running outside it "at standard On-Demand Instance rates", EC2
User Guide, "Cancel a Capacity Reservation", said of a cancellation and assumed of an expiry) and the input data's
dollars. It is
On-Demand capacity held for the account: no interruptions, no wait for capacity. Only reservations the account owns
come in the quotes: a consumer of a shared one is billed for the instances it runs in it (EC2 User Guide, "Billing
assignment for shared Capacity Reservations"), so one shared with the account is plain On-Demand to it.

Pure: the reservations come in the quotes (aws/capacity_reservations.py), their hours left reckoned when read.
"""
from __future__ import annotations

import dataclasses

from trainctl.planner.quotes import HeldReservation, Quotes
from trainctl.planner.spot import risk
from trainctl.plans import ReservationTerms

MIN_COST_USD = 0.01   # a reservation with nothing to add would cost $0, which the ranking's margins divide by


def reservation_options(priced: list[risk.Priced], quotes: Quotes, exclude) -> list[risk.Priced]:
    """An option in each held reservation that fits an EC2 On-Demand layout (its type, in its Region, with the
    layout's nodes free); a reservation of the type with too few free is left out with its reason
    (`exclude(type, count, reason, **where)`)."""
    out = []
    for p in priced:
        o = p.option
        if o.platform != "ec2" or o.market != "on-demand" or o.flexible_group or o.capacity_reservation is not None:
            continue
        for r in quotes.capacity_reservations.get((o.region, o.instance_type), ()):
            if r.available < o.count:
                exclude(o.instance_type, o.count,
                        f"capacity reservation {r.reservation_id} in {r.availability_zone} has {r.available} of "
                        f"{r.total} instances free; the layout needs {o.count}",
                        platform=o.platform, market="on-demand", region=o.region)
                continue
            out.append(_in_reservation(p, r))
    return out


def _in_reservation(p: risk.Priced, r: HeldReservation) -> risk.Priced:
    o = p.option
    inside = o.hours if r.hours_left is None else min(o.hours, max(0.0, r.hours_left))
    after = o.hours - inside
    cost = max(o.hourly_usd * after + p.extra_usd, MIN_COST_USD)
    terms = ReservationTerms(reservation_id=r.reservation_id, availability_zone=r.availability_zone,
                             available=r.available, match=r.match, end=r.end, hours_inside=inside, hours_after=after)
    ends = "no end date" if r.end is None else f"ends {r.end}"
    why = (f"On-Demand Capacity Reservation {r.reservation_id} the account already holds, in {r.availability_zone} "
           f"({r.available} of {r.total} free, {ends}): billed at the On-Demand rate used or not, so its "
           f"{inside:.1f} h of this job add no new cost"
           + (f"; the {after:.1f} h past its end are billed On-Demand (${o.hourly_usd * after:,.2f})" if after else "")
           + "; no interruptions, no wait for capacity" + ("" if after else "; preferred: it costs nothing more"),)
    option = o.model_copy(update={
        "availability_zone": r.availability_zone, "expected_cost_usd": cost, "cost_p50_usd": cost,
        "cost_p90_usd": cost, "hours_p50": o.hours, "hours_p90": o.hours, "wall_hours": o.hours,
        "capacity_odds": 1.0, "interruptions_expected": 0.0, "price_source": "DescribeCapacityReservations",
        # quota: the reservation's instances were admitted against the On-Demand quota when it was made
        # (CreateCapacityReservation fails over it), so the option is not held back by it
        "quota_ok": None, "capacity_reservation": terms, "why": why})
    # the model bills no node-hours: the job's dollars ride as a fixed extra, so the plan's perturbations (prices,
    # hazard, waits) leave a held reservation's cost where it is, as they do a held Capacity Block's
    model = dataclasses.replace(p.model, node_usd_per_hour=0.0, hazard=0.0, capacity_odds=1.0)
    return risk.Priced(option, model, p.input_limit_ratio, cost)
