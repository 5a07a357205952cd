"""Properties of the sandbox's pure market model (the numbers behind scores and Spot prices)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from trainctl_sandbox.market import model as mm

T0 = datetime(2026, 6, 1, tzinfo=timezone.utc)


@given(available=st.floats(1, 1e6), small=st.floats(0.01, 1e5), factor=st.floats(1, 100), types=st.integers(1, 10))
def test_a_bigger_ask_never_scores_higher(available, small, factor, types):
    assert 1 <= mm.placement_score(small * factor, available, types) <= mm.placement_score(small, available, types) <= 10


@given(requested=st.floats(0.01, 1e5), available=st.floats(0, 1e6))
def test_one_or_two_types_score_at_most_three(requested, available):
    assert mm.placement_score(requested, available, 2) <= mm.LOW_SCORE_CAP
    assert mm.placement_score(requested, 0, 5) == 1


@settings(max_examples=50)
@given(seed=st.integers(0, 1000), hours=st.floats(0, 24 * 14), span=st.floats(0, 24 * 7), level=st.floats(0.1, 50))
def test_price_walk_is_bounded_ordered_and_covers_the_start(seed, hours, span, level):
    start = T0 + timedelta(hours=hours)
    end = start + timedelta(hours=span)
    on_demand = level * 2.5
    changes = mm.spot_price_changes(seed, "g5.xlarge", "us-east-1a", level, on_demand, start, end)
    stamps = [t for t, _ in changes]
    assert stamps == sorted(stamps) and stamps[0] <= start and stamps[-1] <= end
    assert all(b - a == mm.PRICE_PERIOD for a, b in zip(stamps, stamps[1:]))
    assert all(level / 3 - 1e-4 <= p <= on_demand + 1e-4 for _, p in changes)
    # a window inside a longer one sees the same prices (history is a function of time, not of the query)
    longer = dict(mm.spot_price_changes(seed, "g5.xlarge", "us-east-1a", level, on_demand,
                                        start - timedelta(days=1), end))
    assert all(longer[t] == p for t, p in changes)


def test_pools_differ_by_az_and_seed():
    pools = {mm.pool_vcpus(s, "g5.12xlarge", z, "10-15%") for s in (0, 1) for z in ("use1-az1", "use1-az2")}
    assert len(pools) == 4
    assert mm.pool_vcpus(0, "p5.48xlarge", "use1-az1", "<5%") > mm.pool_vcpus(0, "p5.48xlarge", "use1-az1", ">20%")
