"""Capacity Block offers in the pure planner: the duration asked, the fee as the cost, the wait in the wall hours,
the unused hours, and an offer too short for the job left out with its reason."""
from __future__ import annotations

import pytest

from trainctl.catalog import load_catalog
from trainctl.planner import plan
from trainctl.planner.capacity_blocks import duration_to_ask, offered_for
from trainctl.planner.quotes import BlockOffer, Quotes
from trainctl.spec import JobSpec, Layout

CAT = load_catalog()
SPEC = JobSpec.model_validate({
    "name": "blocks", "entrypoint": {"bundled": "ddp"},
    "model": {"architecture": "vit_micro", "precision": "fp32", "optimizer": "adam"},
    "workload": {"samples": 6_500_000_000, "batch_size_per_accelerator": 16},
    "candidates": {"layouts": ["p4d.24xlarge:1"], "markets": ["on-demand"], "platforms": ["ec2"],
                   "regions": ["us-west-2"]}})


def offer(oid: str, hours: float, wait: float, fee: float) -> BlockOffer:
    return BlockOffer(oid, "us-west-2b", 1, "2026-01-01T00:00:00+00:00", "2026-01-02T00:00:00+00:00", hours, wait, fee)


@pytest.mark.parametrize("job_hours, asked", [(1.0, 24), (23.5, 24), (23.6, 48), (14 * 24, 21 * 24),
                                              (182 * 24, None)])
def test_the_shortest_duration_aws_sells_that_holds_the_job_and_the_last_half_hour(job_hours, asked):
    assert duration_to_ask(job_hours) == asked


def test_only_block_types_and_sizes():
    assert offered_for("p5.48xlarge", 64) and not offered_for("p5.48xlarge", 65)
    assert not offered_for("g5.xlarge", 1)


def test_a_block_costs_its_fee_waits_for_its_start_and_a_short_one_is_left_out():
    quotes = Quotes(source="live", regions=("us-west-2",), capacity_blocks={
        ("us-west-2", "p4d.24xlarge", 1): (offer("cb-long", 24, 3.0, 300.0), offer("cb-short", 12, 0.0, 100.0))})
    p = plan(SPEC, CAT, quotes)
    od = next(o for o in p.options if o.market == "on-demand")
    block = next(o for o in p.options if o.market == "capacity-block")
    assert block.expected_cost_usd == block.cost_p90_usd == 300.0 and block.hours == od.hours
    assert block.wall_hours == pytest.approx(od.hours + 3.0)
    assert block.capacity_block.unused_hours == pytest.approx(24 - od.hours)
    assert p.options[0] is block and block.rank == 1  # $300 beats On-Demand's ~$416 for the same hours
    short = [e for e in p.excluded if e.market == "capacity-block"]
    assert len(short) == 1 and "cb-short holds 12 h" in short[0].reason
    assert "capacity_block" not in od.model_dump(mode="json")
    assert block.model_dump(mode="json")["capacity_block"]["offering_id"] == "cb-long"


def test_a_layout_that_names_its_market_gets_no_block():
    """`--layout p4d.24xlarge:1:on-demand` is the user's choice of market: a block there is not offered (the launch
    would otherwise stop on a block ranked first); the same layout without a market gets its offers."""
    quotes = Quotes(source="live", regions=("us-west-2",), capacity_blocks={
        ("us-west-2", "p4d.24xlarge", 1): (offer("cb-long", 24, 0.0, 1.0),)})
    pinned = SPEC.model_copy(update={"candidates": SPEC.candidates.model_copy(update={
        "layouts": [Layout.parse("p4d.24xlarge:1:on-demand")]})})
    assert not [o for o in plan(pinned, CAT, quotes).options if o.market == "capacity-block"]
    assert [o for o in plan(SPEC, CAT, quotes).options if o.market == "capacity-block"]


def test_a_block_the_account_holds_costs_nothing_more_and_ranks_ahead_of_a_cheaper_offer():
    held = BlockOffer("cr-held", "us-west-2a", 1, "2026-01-01T00:00:00+00:00", "2026-01-02T00:00:00+00:00", 24, 0.0,
                      0.0, reservation_id="cr-held")
    quotes = Quotes(source="live", regions=("us-west-2",), capacity_blocks={
        ("us-west-2", "p4d.24xlarge", 1): (offer("cb-cheap", 24, 0.0, 1.0), held)})
    first = plan(SPEC, CAT, quotes).options[0]
    assert first.capacity_block.reservation_id == "cr-held" and first.expected_cost_usd == 0.01  # nothing but a cent
    why = " ".join(first.why)
    assert "already holds" in why and "no new cost" in why
