"""Correlated Spot reclaims, fitted at the layout level to the 4-node GPU traces (skypilot-org/spot-traces): a
whole 4-node layout loses 0.244 events per hour with 1.71 nodes each, and the plan's run model says the same."""
from __future__ import annotations

import pytest

from trainctl.planner.spot import risk
from trainctl.planner.spot.hazard import load_hazard_table

TABLE = load_hazard_table()


def test_four_node_layout_events_are_the_traces():
    """179 events from a whole layout in 734.916 whole hours (53 + 36 + 90 in 92.833 + 304.583 + 337.5 h), 306 nodes
    lost: 0.2436 events/h, 1.709 nodes each; per node 0.2436 / 4 = 0.06089, p = (1.709 - 1) / 3 = 0.2365."""
    traces = TABLE.layout_traces.values()
    assert sum(t["events"] for t in traces) == 179 and sum(t["nodes_lost"] for t in traces) == 306
    events, per_event = TABLE.layout_events(">20%", 4)
    assert events == pytest.approx(179 / 734.916, rel=1e-3)
    assert per_event == pytest.approx(306 / 179, rel=1e-3)
    # the old formula (pooled hazard 0.229 per node, p = 0.301) said 0.229 x 4 / (1 + 3 x 0.301) = 0.48 events/h
    assert events < 0.229 * 4 / (1 + 3 * 0.301) / 1.9


def test_run_model_counts_each_event_once():
    """The simulation's event rate is hazard x n / (1 + (n - 1) p): with the node-loss hazard the table gives, it
    is the layout rate, n x 0.06089 x the band's ratio, not the correlated losses counted twice."""
    times = risk.JobTimes(work_hours=10.0, step_s=1.0, checkpoint_s=5.0, interval_hours=0.5, restart_minutes=10,
                          accelerator_kind="gpu")
    model, words = risk.run_model("ec2", "spot", 4, 1.0, times, None, ">20%", TABLE, 0.5)
    assert model.event_rate == pytest.approx(4 * TABLE.per_node_event_rate)
    assert model.same_event_p == pytest.approx(TABLE.same_event_probability)
    assert any("0.244 reclaim events/h for this 4-node layout, 1.7 nodes each" in w for w in words)
    lower, _ = TABLE.layout_events("<5%", 4)   # '<5%': ln(0.975)/ln(0.75) of the traced band
    assert lower == pytest.approx(0.2436 * 0.0880, rel=2e-3)
