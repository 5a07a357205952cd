"""On-Demand Capacity Reservations the account holds, in the pure planner: an option in a reservation with room
for the layout costs only what the job adds (the hours past the reservation's end, at the On-Demand rate), ranks
first, and says it is already held; a reservation with too few free instances is left out with its reason."""
from __future__ import annotations

import pytest

from trainctl.catalog import load_catalog
from trainctl.planner import plan
from trainctl.planner.quotes import HeldReservation, Quotes
from trainctl.spec import JobSpec

CAT = load_catalog()
SPEC = JobSpec.model_validate({
    "name": "odcr", "entrypoint": {"bundled": "ddp"},
    "model": {"architecture": "vit_micro", "precision": "fp32", "optimizer": "adam"},
    "workload": {"samples": 2_000_000_000, "batch_size_per_accelerator": 16},
    "candidates": {"layouts": ["g5.xlarge:2"], "markets": ["spot", "on-demand"], "platforms": ["ec2"],
                   "regions": ["us-east-1"]}})


def held(rid: str, available: int, hours_left: float | None = None, az: str = "us-east-1b") -> HeldReservation:
    return HeldReservation(rid, az, available, max(available, 2), "targeted",
                           None if hours_left is None else "2026-01-02T00:00:00+00:00", hours_left)


def quotes(*reservations: HeldReservation, itype: str = "g5.xlarge") -> Quotes:
    return Quotes(source="live", regions=("us-east-1",), capacity_reservations={("us-east-1", itype): reservations})


def test_a_held_reservation_costs_nothing_more_and_ranks_first():
    p = plan(SPEC, CAT, quotes(held("cr-0a", 2)))
    first, on_demand = p.options[0], next(o for o in p.options if o.market == "on-demand"
                                          and o.capacity_reservation is None)
    assert first.capacity_reservation.reservation_id == "cr-0a" and first.market == "on-demand"
    assert first.expected_cost_usd == first.cost_p90_usd == 0.01 and first.availability_zone == "us-east-1b"
    assert first.hours == on_demand.hours and first.interruptions_expected == 0
    assert first.capacity_reservation.hours_inside == pytest.approx(on_demand.hours)
    why = " ".join(first.why)
    assert "already holds" in why and "no new cost" in why and "preferred" in why
    assert "capacity_reservation" not in on_demand.model_dump(mode="json")  # other options keep their documents


def test_the_hours_past_its_end_are_billed_on_demand():
    on_demand = next(o for o in plan(SPEC, CAT, Quotes(source="live", regions=("us-east-1",))).options
                     if o.market == "on-demand")
    p = plan(SPEC, CAT, quotes(held("cr-0a", 2, hours_left=on_demand.hours / 2)))
    reserved = next(o for o in p.options if o.capacity_reservation is not None)
    assert reserved.capacity_reservation.hours_after == pytest.approx(on_demand.hours / 2)
    assert reserved.expected_cost_usd == pytest.approx(on_demand.hourly_usd * on_demand.hours / 2, abs=0.01)
    assert "past its end are billed On-Demand" in " ".join(reserved.why)


@pytest.mark.parametrize("reservation, itype", [(held("cr-few", 1), "g5.xlarge"), (held("cr-other", 4), "g5.2xlarge")])
def test_a_reservation_too_small_or_of_another_type_is_not_offered(reservation, itype):
    p = plan(SPEC, CAT, quotes(reservation, itype=itype))
    assert not [o for o in p.options if o.capacity_reservation is not None]
    left_out = [e.reason for e in p.excluded if reservation.reservation_id in e.reason]
    assert left_out == (["capacity reservation cr-few in us-east-1b has 1 of 2 instances free; the layout needs 2"]
                        if itype == "g5.xlarge" else [])
