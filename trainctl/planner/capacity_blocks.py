"""EC2 Capacity Blocks as plan options: an offer bought up front for a fixed start and end, beside Spot and On-Demand.

A block is priced from the layout's On-Demand option (same type, count and Region on EC2): the same work hours (no
interruptions, no capacity wait once it starts), its upfront fee as the cost whether the job uses all of it or not,
the wait until it starts added to the wall hours. AWS begins terminating a block's instances 30 minutes before its
end (EC2 User Guide, "Work with Capacity Blocks"), so a job fits a block only if its hours end before that. Pure:
the offers come in the quotes (aws/capacity_blocks.py), their waits already reckoned from when they were asked. A
block the account already holds comes as an offer with its reservation and a fee of 0: its cost is sunk.
"""
from __future__ import annotations

import dataclasses
import math

from trainctl.planner.quotes import BlockOffer, Quotes
from trainctl.planner.spot import risk
from trainctl.plans import CapacityBlockTerms

# The types AWS sells as Capacity Blocks (EC2 User Guide, "Capacity Blocks for ML", supported instance types) that
# the catalog holds. The Regions that sell each are AWS's answer to DescribeCapacityBlockOfferings, not a table here.
BLOCK_TYPES = frozenset({"p4d.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "trn1.32xlarge",
                         "trn2.48xlarge"})
MAX_BLOCK_INSTANCES = 64        # per block (DescribeCapacityBlockOfferings: InstanceCount)
RECLAIM_BEFORE_END_H = 0.5      # instances are terminated from 30 minutes before the end
MAX_DAILY_HOURS = 14 * 24       # durations: 1-day steps up to 14 days, then 7-day steps up to 182 days
MAX_BLOCK_HOURS = 182 * 24
MIN_COST_USD = 0.01


def offered_for(instance_type: str, count: int) -> bool:
    return instance_type in BLOCK_TYPES and 1 <= count <= MAX_BLOCK_INSTANCES


def duration_to_ask(job_hours: float) -> int | None:
    """The block duration (hours) to ask for a job of `job_hours`: the shortest AWS sells that holds the job and the
    half hour before the end; None when no block is long enough."""
    need = job_hours + RECLAIM_BEFORE_END_H
    days = max(1, math.ceil(need / 24))
    if days > 14:
        days = 7 * math.ceil(days / 7)
    hours = days * 24
    return hours if hours <= MAX_BLOCK_HOURS else None


def block_options(priced: list[risk.Priced], quotes: Quotes, exclude, pinned=frozenset()) -> list[risk.Priced]:
    """The block options of every EC2 On-Demand option whose layout has offers in the quotes; an offer too short for
    the job is left out with its reason (`exclude(type, count, reason, **where)`). `pinned`: the (type, count) of
    layouts that named their market (`--layout p4d.24xlarge:2:on-demand`): the user chose it, so no block there."""
    out = []
    for p in priced:
        o = p.option
        offered = {"ec2": quotes.capacity_blocks, "sagemaker": quotes.training_plans}.get(o.platform)
        if offered is None or o.market != "on-demand" or o.flexible_group or (o.instance_type, o.count) in pinned:
            continue
        for offer in offered.get((o.region, o.instance_type, o.count), ()):
            made = _block_option(p, offer)
            if made is None:
                exclude(o.instance_type, o.count,
                        f"{kind(o.platform)} {offer.offering_id} holds {offer.duration_hours:g} h; the job needs "
                        f"{o.hours:.1f} h and its instances end {RECLAIM_BEFORE_END_H * 60:.0f} min before the block",
                        platform=o.platform, market="capacity-block", region=o.region)
            else:
                out.append(made)
    return out


def kind(platform: str) -> str:
    """What reserved capacity is called on the platform: EC2's Capacity Blocks, SageMaker's training plans."""
    return "SageMaker training plan" if platform == "sagemaker" else "capacity block"


def _block_option(p: risk.Priced, offer: BlockOffer) -> risk.Priced | None:
    o = p.option
    usable = offer.duration_hours - RECLAIM_BEFORE_END_H
    if o.hours > usable or offer.instance_count < o.count:
        return None
    # a held block with nothing else to pay would cost $0, which the ranking's margins divide by (spot/risk.py
    # _margin): a cent stands in for it
    cost = max(offer.upfront_fee_usd + p.extra_usd, MIN_COST_USD)
    terms = CapacityBlockTerms(offering_id=offer.offering_id, availability_zone=offer.availability_zone,
                               start=offer.start, end=offer.end, duration_hours=offer.duration_hours,
                               wait_hours=offer.wait_hours, upfront_fee_usd=offer.upfront_fee_usd,
                               unused_hours=max(0.0, offer.duration_hours - o.hours),
                               reservation_id=offer.reservation_id)
    starts = "starts now" if offer.wait_hours <= 0 else f"starts in {offer.wait_hours:.1f} h ({offer.start})"
    if offer.reservation_id:  # held: its fee is sunk, so it costs the job nothing more and ranks ahead
        why = (f"{kind(o.platform)} {offer.reservation_id} the account already holds, in {offer.availability_zone}: "
               f"no new cost (its fee was paid when bought), {offer.duration_hours:g} h, {starts}; no "
               f"interruptions; preferred for that",)
    else:
        why = (f"{kind(o.platform)} {offer.offering_id} in {offer.availability_zone}: ${offer.upfront_fee_usd:,.2f} up "
               f"front for {offer.duration_hours:g} h, {starts}; no interruptions; the job leaves "
               f"{terms.unused_hours:.1f} h of it unused, paid all the same; buying it cannot be undone",)
    option = o.model_copy(update={
        "market": "capacity-block", "availability_zone": offer.availability_zone,
        "hourly_usd": offer.upfront_fee_usd / offer.duration_hours if offer.duration_hours else 0.0,
        "expected_cost_usd": cost, "cost_p50_usd": cost, "cost_p90_usd": cost, "hours_p50": o.hours,
        "hours_p90": o.hours, "wall_hours": o.hours + offer.wait_hours, "capacity_odds": 1.0,
        "spot_placement_score": None, "quota_ok": None, "interruptions_expected": 0.0, "price_source": "DescribeCapacityBlockOfferings",
        "capacity_block": terms, "why": why})
    # quota_ok None: a block is not On-Demand capacity; AWS caps blocks at 256 instances per account instead
    # No node-hours billed beside the fee: the model prices nothing, the fee rides as a fixed extra, so the plan's
    # perturbations (hazard, prices, waits) leave a block's cost where it is.
    model = dataclasses.replace(p.model, node_usd_per_hour=0.0, hazard=0.0, capacity_odds=1.0)
    return risk.Priced(option, model, p.input_limit_ratio, cost)
