"""The Spot run model under the recovery the spec asks for (planner/spot/recovery.py): elastic survivors train
instead of idling, a replacement past the slack is bought On-Demand or ends the job; the default is today's model.
Hand-checked against the lognormal's closed forms; the simulation's mean against the expectation."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest

from trainctl.planner.spot import recovery, risk
from trainctl.planner.spot import simulation as simulate
from trainctl.planner.spot.hazard import load_hazard_table

# 4 nodes, 10 h of work, every event one node (no correlation: the hand arithmetic stays one lognormal)
ONE = simulate.RunModel(work_hours=10.0, nodes=4, node_usd_per_hour=1.0, hazard=0.05, hazard_log_sd=0.5,
                        same_event_p=0.0, notice_ok=True, lost_hours_notice=0.0, restart_hours=0.2,
                        wait_median_one=0.5, wait_exponent=0.3, wait_log_sd_one=1.0, wait_log_sd_many=1.0)
MU, SD = math.log(0.5), 1.0
MEAN_WAIT = 0.5 * math.exp(SD * SD / 2)


def _phi(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def _capped(cap: float) -> float:
    """E[min(w, cap)] for the lognormal wait of ONE, written out."""
    return MEAN_WAIT * _phi((math.log(cap) - MU - SD * SD) / SD) + cap * (1 - _phi((math.log(cap) - MU) / SD))


def test_the_default_policy_is_the_original_model_number_for_number():
    explicit = replace(ONE, elastic_min_nodes=0, shortage="wait", shortage_after_hours=math.inf)
    assert simulate.expected(explicit) == simulate.expected(ONE)
    assert simulate.simulate(explicit) == simulate.simulate(ONE)
    k = simulate.expected(ONE).interruptions
    # survivors idle, billed, for the whole wait: 3 x E[w] per event on top of 4 x (lost + restart)
    assert simulate.expected(ONE).cost_usd == pytest.approx(4 * 10 + k * (4 * 0.2 + 3 * MEAN_WAIT))


def test_elastic_survivors_idle_only_for_their_own_restart_and_shorten_the_run():
    el = replace(ONE, elastic_min_nodes=2)
    k = simulate.expected(ONE).interruptions
    idle = _capped(0.2)                     # E[min(w, r)]: the survivors' restart at 3 nodes
    got = simulate.expected(el)
    assert got.cost_usd == pytest.approx(4 * 10 + k * (4 * 0.2 + 3 * idle), rel=1e-9)
    # wall: the wait less the work the 3 nodes did meanwhile, (E[w] - E[min(w, r)]) x 3/4
    assert got.wall_hours == pytest.approx(10 + k * (0.2 + MEAN_WAIT - (MEAN_WAIT - idle) * 0.75), rel=1e-9)
    assert got.cost_usd < simulate.expected(ONE).cost_usd
    spread = simulate.simulate(el)
    assert spread.mean_cost_usd == pytest.approx(got.cost_usd, rel=0.01)


def test_elastic_does_nothing_below_min_nodes():
    # min_nodes 4 of 4: a lost node leaves 3 < 4, so the layout waits whole, as today
    assert simulate.expected(replace(ONE, elastic_min_nodes=4)).cost_usd == simulate.expected(ONE).cost_usd
    # correlated events that take 3 of 4 nodes leave 1 < 2: those wait whole, the others train
    corr = replace(ONE, same_event_p=0.5)
    assert (simulate.expected(corr).cost_usd > simulate.expected(replace(corr, elastic_min_nodes=2)).cost_usd
            > simulate.expected(replace(corr, elastic_min_nodes=1)).cost_usd)


def test_on_demand_fallback_caps_the_wait_and_pays_the_premium_for_half_the_run():
    od = replace(ONE, shortage="on-demand", shortage_after_hours=1.0, fallback_price_ratio=3.0)
    k = simulate.expected(ONE).interruptions
    beyond = 1 - _phi((math.log(1.0) - MU) / SD)
    got = simulate.expected(od)
    assert got.fallback_usd == pytest.approx(k * beyond * 1 * 0.5 * 10 * (3.0 - 1.0), rel=1e-9)
    assert got.cost_usd == pytest.approx(4 * 10 + k * (4 * 0.2 + 3 * _capped(1.0)) + got.fallback_usd, rel=1e-9)
    assert got.wall_hours < simulate.expected(ONE).wall_hours
    spread = simulate.simulate(od)
    assert spread.mean_cost_usd == pytest.approx(got.cost_usd, rel=0.03)


def test_fail_reports_the_chance_the_shortage_ends_the_job():
    fail = replace(ONE, shortage="fail", shortage_after_hours=1.0, hazard=0.2)
    got, spread = simulate.expected(fail), simulate.simulate(fail)
    assert 0.1 < got.fail_probability < 0.9
    assert spread.failed_share == pytest.approx(got.fail_probability, abs=0.03)
    assert got.fallback_usd == 0.0


def _times(**kw) -> risk.JobTimes:
    return risk.JobTimes(work_hours=10.0, step_s=1.0, checkpoint_s=5.0, interval_hours=0.5, restart_minutes=10,
                         accelerator_kind="gpu", **kw)


def test_sagemaker_keeps_its_managed_restart_and_says_so():
    table = load_hazard_table()
    model, words = risk.run_model("sagemaker", "spot", 4, 1.0, _times(elastic_min_nodes=2), None, ">20%", table, 0.5)
    assert model.elastic_min_nodes == 0 and recovery.default_policy(model)
    assert any("SageMaker cannot change a running job's size" in w for w in words)
    model, words = risk.run_model("ec2", "spot", 4, 1.0, _times(elastic_min_nodes=2), None, ">20%", table, 0.5)
    assert model.elastic_min_nodes == 2
    assert any(w.startswith("elastic: trains on 3 of 4 nodes while a node is replaced") for w in words)


def test_the_slack_is_the_deadlines_share_per_expected_interruption():
    table = load_hazard_table()
    times = _times(on_spot_shortage="on-demand", deadline_hours=12.0, max_spot_wait_hours=4.0)
    model, words = risk.run_model("ec2", "spot", 4, 1.0, times, None, ">20%", table, 0.5, od_usd=2.5)
    k = simulate.expected_events(model)
    busy = (model.start_unbilled_hours + model.start_billed_hours + 10.0
            + k * (model.lost_per_event + model.restart_hours))
    assert model.shortage_after_hours == pytest.approx((12.0 - busy) / max(k, 1.0))
    assert model.fallback_price_ratio == 2.5 and model.shortage == "on-demand"
    loose, _ = risk.run_model("ec2", "spot", 4, 1.0, replace(times, deadline_hours=None), None, ">20%", table, 0.5)
    assert loose.shortage_after_hours == 4.0


def test_a_long_run_never_pays_more_fallback_than_every_node_on_demand_throughout():
    # 2,000 h with a 0.5 h slack: hundreds of events each buy nodes On-Demand "for the rest of the run"; summed
    # per event they would pay the premium many times over. The cap: all 4 nodes On-Demand for the whole run.
    long = replace(ONE, work_hours=2000.0, hazard=0.06, shortage="on-demand", shortage_after_hours=0.5,
                   fallback_price_ratio=3.0)
    cap = 4 * 2000.0 * (3.0 - 1.0)
    assert simulate.expected(long).fallback_usd == cap
    # the same random runs without a premium (On-Demand at the Spot price): no run pays more than the cap above them
    paid, free = simulate.simulate(long), simulate.simulate(replace(long, fallback_price_ratio=1.0))
    assert free.mean_cost_usd < paid.mean_cost_usd <= free.mean_cost_usd + cap
    assert paid.cost_range_usd[1] <= free.cost_range_usd[1] + cap
