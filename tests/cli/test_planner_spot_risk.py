"""Spot risk, fixed costs, input pipeline and the Monte Carlo: hand-checked numbers for each term, the seed, the
JSON keys and --objective p90-cost as a user meets them (docs/cost-model.md, "Spot interruptions" to "Risk")."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest

from tests.support.helpers import CONFIGS, run_cli, run_json
from trainctl.perf import input_pipeline
from trainctl.planner.spot import launch_overheads
from trainctl.planner.spot import risk
from trainctl.planner.spot import simulation as simulate
from trainctl.catalog import load_catalog
from trainctl.planner.spot.hazard import band_hazard, load_hazard_table
from trainctl.planner import plan
from trainctl.planner.quotes import Quotes
from trainctl.spec import load_spec

TABLE = load_hazard_table()
# 4 nodes, 10 h of work, 15-20% band, EC2: the shape of the reference Spot layout
SPOT = simulate.RunModel(work_hours=10.0, nodes=4, node_usd_per_hour=0.5, start_unbilled_hours=1 / 60,
                         start_billed_hours=4 / 60, hazard=0.15, hazard_log_sd=0.833, same_event_p=0.3,
                         notice_ok=True, lost_hours_notice=10 / 3600, interval_hours=1 / 3, restart_hours=10 / 60,
                         wait_median_one=0.415, wait_exponent=math.log(0.609 / 0.415) / math.log(4),
                         wait_log_sd_one=1.469, wait_log_sd_many=1.262, survivors_billed=True)


def test_hazard_is_the_band_scaled_to_the_traces():
    """The 4-node traces' per-node event rate 0.06089/h ('>20%'); one node loses nodes at that rate, four nodes at
    0.06089 x (1 + 3 x 0.2365) per node (the layout's 0.2436 events/h x 1.71 nodes / 4)."""
    assert TABLE.for_band(">20%").per_instance_hour == pytest.approx(0.06089)
    assert TABLE.for_band(">20%", 4).per_instance_hour == pytest.approx(0.06089 * (1 + 3 * 0.2365))
    # '<5%': 0.06089 x ln(1 - 0.025) / ln(1 - 0.25) = 0.005359 per node-hour; the advisor alone: 3.47e-5
    low = TABLE.for_band("<5%")
    assert low.per_instance_hour == pytest.approx(0.005359, rel=1e-3)
    assert low.advisor_only == pytest.approx(-math.log(0.975) / 730) == band_hazard("<5%")
    # the figure: the advisor alone predicts ~0.01 interruptions for a 10 h, 4-node job
    assert 4 * 10 * band_hazard("5-10%") == pytest.approx(0.0043, rel=0.01)


def test_correlated_reclaims_make_fewer_but_larger_events():
    # 4 nodes at 0.15 each: 0.6 node losses/h in 0.6 / (1 + 3 x 0.3) = 0.3158 events/h
    assert SPOT.event_rate == pytest.approx(0.6 / 1.9)
    assert replace(SPOT, same_event_p=0.0).event_rate == pytest.approx(0.6)


def test_replacement_wait_follows_the_traces():
    assert TABLE.wait_median_hours(1) == pytest.approx(0.415)
    assert TABLE.wait_median_hours(4) == pytest.approx(0.609)


def test_notice_checkpoint_or_half_an_interval():
    times = risk.JobTimes(work_hours=10, step_s=0.5, checkpoint_s=2.77, interval_hours=1 / 3, restart_minutes=10,
                          accelerator_kind="gpu")
    ok, lost, _ = risk.notice_terms("ec2", times, 120)
    assert ok and lost == pytest.approx((5 + 2.77) / 3600)       # 5 s poll + the write
    slow = replace(times, checkpoint_s=60.0)                      # 5 + 0.5 + 2 x 60 = 125.5 s > 120 s
    ok, _, words = risk.notice_terms("ec2", slow, 120)
    assert not ok and "half a checkpoint interval" in words
    assert replace(SPOT, notice_ok=False).lost_per_event == pytest.approx(1 / 6)


def test_expected_run_by_hand():
    # no hazard spread: E[events] = L W / (1 - L l) exactly
    m = replace(SPOT, hazard_log_sd=0.0)
    rate = 0.6 / 1.9
    k = rate * 10 / (1 - rate * 10 / 3600)
    e = simulate.expected(m)
    assert e.interruptions == pytest.approx(k)
    wait1 = 0.415 * math.exp(1.469**2 / 2)
    assert simulate._wait_terms(replace(m, same_event_p=0.0))[0] == pytest.approx(wait1)
    mean_wait, survivors = simulate._wait_terms(m)
    node_hours = 4 * (4 / 60 + 10 + k * (10 / 3600 + 10 / 60)) + k * survivors
    assert e.billed_hours == pytest.approx(node_hours / 4)
    assert e.cost_usd == pytest.approx(node_hours * 0.5)
    assert e.wall_hours == pytest.approx(5 / 60 + 10 + k * (10 / 3600 + 10 / 60 + mean_wait))
    # SageMaker bills no survivor while it waits
    assert simulate.expected(replace(m, survivors_billed=False)).billed_hours == pytest.approx(
        4 / 60 + 10 + k * (10 / 3600 + 10 / 60))


def test_on_demand_pays_start_up_only():
    m = simulate.RunModel(work_hours=3.0, nodes=2, node_usd_per_hour=5.0, start_unbilled_hours=0.1,
                          start_billed_hours=0.2)
    e = simulate.expected(m)
    assert (e.interruptions, e.billed_hours, e.cost_usd, e.wall_hours) == pytest.approx((0, 3.2, 32.0, 3.3))


def test_monte_carlo_is_deterministic_for_a_seed_and_agrees_with_the_expectation():
    a = simulate.simulate(SPOT, simulate.seed_for("ec2:us-east-1:g5.2xlarge:4:spot"))
    b = simulate.simulate(SPOT, simulate.seed_for("ec2:us-east-1:g5.2xlarge:4:spot"))
    c = simulate.simulate(SPOT, simulate.seed_for("ec2:us-west-2:g5.2xlarge:4:spot"))
    assert a == b and a != c
    assert a.cost_usd[0] <= a.cost_usd[1] <= a.cost_usd[2] and a.cost_usd[0] >= 4 * (10 + 4 / 60) * 0.5
    big = simulate.simulate(SPOT, simulate.seed_for("x"), runs=20000)
    assert big.mean_cost_usd == pytest.approx(simulate.expected(SPOT).cost_usd, rel=0.02)


def test_fixed_costs_per_launch():
    sm = launch_overheads.start_cost("sagemaker", "gpu")
    assert (sm.unbilled_hours * 60, sm.billed_hours * 60) == pytest.approx((4, 5))   # Starting is not billed
    trn = launch_overheads.start_cost("ec2", "neuron")
    assert trn.billed_hours * 60 == pytest.approx(4 + 15)                           # Neuron compiles on start
    assert launch_overheads.restart_billed_hours(10, "neuron") * 60 == pytest.approx(25)


def test_input_pipeline_caps_a_starved_layout():
    # g5.xlarge: 4 vCPUs, 1 GPU -> 3 loader vCPUs / 5.919 ms per JPEG = 506.8 samples/s per node
    cap = input_pipeline.node_capacity("jpeg", vcpus=4, accelerators_per_node=1)
    assert cap.samples_per_s == pytest.approx(3 / 0.005919)
    assert input_pipeline.capped_throughput(1200.0, 2, cap) == (pytest.approx(2 * 3 / 0.005919), True)
    assert input_pipeline.capped_throughput(800.0, 2, input_pipeline.node_capacity("device", 4, 1)) == (800.0, False)


def test_plan_flags_input_bound_layouts(tmp_path):
    spec_path = tmp_path / "jpeg.yaml"
    text = (CONFIGS / "vit-base-g5.yaml").read_text().replace("batch_size_per_accelerator: 128",
                                                               "batch_size_per_accelerator: 128\n  data_source: jpeg")
    spec_path.write_text(text.replace("architecture: vit_base_patch16_224", "params: 5.0e6\n  flops_per_sample: 1.0e9"))
    spec = load_spec(spec_path)
    p = plan(spec, load_catalog(), Quotes.offline(spec.candidates.regions))
    bound = [o for o in p.options if o.input_bound]
    assert bound and all(any(w.startswith("INPUT-BOUND") for w in o.why) for o in bound)
    g5x = next(o for o in bound if (o.instance_type, o.count) == ("g5.xlarge", 1))
    assert g5x.throughput_samples_per_s == pytest.approx(3 / 0.005919)


def test_json_has_the_risk_keys_and_p90_objective_ranks_by_p90(tmp_path):
    doc = run_json(["plan", "configs/vit-base-g5.yaml", "--offline"], tmp_path)
    for o in doc["options"]:
        assert {"cost_p50_usd", "cost_p90_usd", "hours_p50", "hours_p90", "expected_cost_usd"} <= set(o)
        assert o["cost_p90_usd"] >= o["cost_p50_usd"] > 0 and o["hours_p90"] >= o["hours_p50"] > 0
    costs = [o["expected_cost_usd"] for o in doc["options"]]
    assert costs == sorted(costs)
    assert any(w.startswith("sensitivity:") for w in doc["warnings"])
    p90 = run_json(["plan", "configs/vit-base-g5.yaml", "--offline", "--objective", "p90-cost"], tmp_path)
    assert p90["objective"] == "p90-cost"
    tails = [o["cost_p90_usd"] for o in p90["options"]]
    assert tails == sorted(tails)
    assert "90th-percentile" in p90["options"][0]["why"][0]


def test_unknown_objective_is_one_line(tmp_path):
    proc = run_cli(["plan", "configs/vit-base-g5.yaml", "--offline", "--objective", "p99"], tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "use cost, p90-cost or time" in proc.stderr


def test_sensitivity_names_an_assumption_that_flips_the_top_choice():
    cheap_risky = simulate.RunModel(work_hours=10, nodes=4, node_usd_per_hour=0.25, hazard=0.3, hazard_log_sd=0.0,
                                    notice_ok=True, restart_hours=0.2, wait_median_one=0.4, survivors_billed=True)
    safe = simulate.RunModel(work_hours=10, nodes=1, node_usd_per_hour=2.0)   # $20, no risk
    from trainctl.plans import Option

    def option(layout, market, cost):
        t, n, _ = layout.split(":")
        return Option(rank=0, platform="ec2", instance_type=t, count=int(n), market=market, region="us-east-1",
                      accelerators=int(n), hourly_usd=1, throughput_samples_per_s=1, throughput_source="model",
                      hours=1, expected_cost_usd=cost)
    ranked = [risk.Priced(option("g5.2xlarge:4:spot", "spot", simulate.expected(cheap_risky).cost_usd), cheap_risky,
                          None),
              risk.Priced(option("g5.12xlarge:1:on-demand", "on-demand", 20.0), safe, None)]
    assert ranked[0].option.expected_cost_usd < 20.0   # Spot is #1 today; twice the hazard makes it dearer
    line = risk.sensitivity(ranked, "cost")
    assert line.startswith("sensitivity: the assumption that most changes the top choice is")
    assert "g5.12xlarge:1:on-demand" in line


def test_sensitivity_names_the_closest_call_when_nothing_flips():
    """Hand-checked: two On-Demand runs at $1/h. A: 10 h + 0.1 h billed start-up = $10.10; B: 10.5 h, no
    start-up = $10.50. A leads by 10.5/10.1 - 1 = 3.96%. Only 'start-up x2' touches On-Demand runs: A then
    costs $10.20 and leads by 10.5/10.2 - 1 = 2.94%; the Spot and input assumptions change nothing."""
    from trainctl.plans import Option

    def option(t, cost):
        return Option(rank=0, platform="ec2", instance_type=t, count=1, market="on-demand", region="us-east-1",
                      accelerators=1, hourly_usd=1, throughput_samples_per_s=1, throughput_source="model",
                      hours=1, expected_cost_usd=cost)
    a = simulate.RunModel(work_hours=10, nodes=1, node_usd_per_hour=1.0, start_billed_hours=0.1)
    b = simulate.RunModel(work_hours=10.5, nodes=1, node_usd_per_hour=1.0)
    ranked = [risk.Priced(option("g5.xlarge", 10.1), a, None), risk.Priced(option("g5.2xlarge", 10.5), b, None)]
    line = risk.sensitivity(ranked, "cost")
    assert "g5.xlarge:1:on-demand on ec2) stays cheapest" in line
    assert line.endswith("the assumption that most changes it is 'start-up and restart times x2': its lead over "
                         "the next layout falls from 4.0% to 2.9%")


@pytest.mark.parametrize("hazard", [0.0005, 0.005, 0.05, 0.5])
def test_the_simulated_spread_brackets_the_expected_cost(hazard):
    # From rare interruptions (most runs uninterrupted) to frequent ones: the percentiles are ordered, the expected
    # cost lies inside the simulated range, and the simulation's mean is the expectation.
    m = replace(SPOT, hazard=hazard, nodes=1, same_event_p=0.0)
    s = simulate.simulate(m, simulate.seed_for(f"bracket:{hazard}"), runs=20000)
    expected = simulate.expected(m).cost_usd
    assert s.cost_usd[0] <= s.cost_usd[1] <= s.cost_usd[2]
    assert s.cost_range_usd[0] <= expected <= s.cost_range_usd[1]
    assert s.mean_cost_usd == pytest.approx(expected, rel=0.01)


def test_a_p90_below_the_expected_cost_says_why():
    # Rare, costly interruptions: fewer than one run in ten is interrupted, so the 90th percentile is the cost of
    # an uninterrupted run, below the mean that carries the rare rework. The option says so instead of looking wrong.
    m = replace(SPOT, hazard=0.0005, nodes=1, same_event_p=0.0)
    o = risk.with_spread(risk.Priced(_option(simulate.expected(m).cost_usd), m, None))
    assert o.cost_p50_usd <= o.cost_p90_usd < o.expected_cost_usd
    line = next(w for w in o.why if w.startswith("p90 below the expected cost"))
    assert "of runs are interrupted" in line and "uninterrupted" in line


def _option(cost: float):
    from trainctl.plans import Option

    return Option(rank=1, platform="ec2", instance_type="trn1.32xlarge", count=1, market="spot", region="us-east-1",
                  accelerators=32, hourly_usd=0.5, throughput_samples_per_s=1.0, throughput_source="model", hours=1.0,
                  expected_cost_usd=cost, interruptions_expected=0.0, fits_memory=True, pareto=False, why=())
