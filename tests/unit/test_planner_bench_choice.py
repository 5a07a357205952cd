"""Which layouts a bench measures (planner/bench_choice.py): only those whose throughput band could change the
top choice; --top and --layout override; the cap refuses a bench whose dollar bound is over it."""
from __future__ import annotations

from trainctl.planner.bench_choice import bound_usd, choose, default_cap, value_range
from trainctl.plans import Option, Plan


def option(rank: int, itype: str, count: int, cost: float, rate: float = 100.0, band=(70.0, 130.0),
           source: str = "model", hourly: float = 2.0, platform: str = "sagemaker", market: str = "spot") -> Option:
    return Option(rank=rank, platform=platform, instance_type=itype, count=count, market=market, region="us-east-1",
                  accelerators=count, hourly_usd=hourly, throughput_samples_per_s=rate, throughput_source=source,
                  hours=cost / hourly, expected_cost_usd=cost, throughput_band=band if source == "model" else None)


def plan_of(*options: Option) -> Plan:
    return Plan(spec="job.yaml", spec_name="job", source="offline", catalog_date="2026-01-01", options=options)


def test_cost_band_follows_throughput_band():
    best, worst = value_range(option(1, "g5.xlarge", 1, 100.0, rate=100.0, band=(50.0, 200.0)), "cost")
    assert (best, worst) == (50.0, 200.0)


def test_option_that_loses_at_the_top_of_its_band_is_not_measured():
    top = option(1, "g5.xlarge", 4, 100.0)               # worst case 100 x 100/70 = 142.9
    close = option(2, "g5.12xlarge", 1, 120.0)           # best case 120 x 100/130 = 92.3: could win
    hopeless = option(3, "p4d.24xlarge", 1, 400.0)       # best case 307.7: loses whatever it measures
    choice = choose(plan_of(top, close, hopeless), max_usd=100.0)
    assert [c.option.instance_type for c in choice.chosen] == ["g5.xlarge", "g5.12xlarge"]
    assert [c.option.instance_type for c in choice.skipped] == ["p4d.24xlarge"]
    assert "loses whatever it measures" in choice.skipped[0].reason
    assert choice.refusal is None


def test_measured_or_given_throughput_has_nothing_left_to_measure():
    top = option(1, "g5.xlarge", 1, 100.0, source="measured")
    other = option(2, "g6.xlarge", 1, 101.0, source="given")
    cheaper_maybe = option(3, "g5.2xlarge", 1, 110.0)    # best 84.6 < the top's 100 (no band: its worst is itself)
    choice = choose(plan_of(top, other, cheaper_maybe), max_usd=100.0)
    assert [c.option.instance_type for c in choice.chosen] == ["g5.2xlarge"]


def test_one_bench_per_layout_across_platforms_and_markets():
    a = option(1, "g5.xlarge", 1, 100.0, platform="sagemaker")
    b = option(2, "g5.xlarge", 1, 101.0, platform="ec2")
    c = option(3, "g5.xlarge", 1, 102.0, market="on-demand")
    choice = choose(plan_of(a, b, c), max_usd=100.0)
    assert len(choice.chosen) == 1 and choice.chosen[0].option.platform == "sagemaker"


def test_top_and_layout_override_the_value_rule():
    top = option(1, "g5.xlarge", 4, 100.0)
    hopeless = option(2, "p4d.24xlarge", 1, 400.0)
    assert [c.option.instance_type for c in choose(plan_of(top, hopeless), top=2, max_usd=100.0).chosen] == \
        ["g5.xlarge", "p4d.24xlarge"]
    named = choose(plan_of(top, hopeless), layouts=("p4d.24xlarge:1",), max_usd=100.0)
    assert [c.option.instance_type for c in named.chosen] == ["p4d.24xlarge"]
    missing = choose(plan_of(top, hopeless), layouts=("g6.xlarge:2",), max_usd=100.0)
    assert missing.chosen == () and "g6.xlarge:2" in missing.notes[0]


def test_dollar_bound_is_hourly_price_times_hard_runtime_and_billed_start():
    o = option(1, "g5.xlarge", 4, 100.0, hourly=6.0, platform="ec2")  # hourly_usd is already the whole layout
    assert bound_usd(o, 15.0) == 6.0 * (15.0 + 4.0) / 60.0


def test_default_cap_is_small_against_the_job():
    cap, rule = default_cap(plan_of(option(1, "g5.xlarge", 1, 100.0)))
    assert cap == 5.0 and "5%" in rule
    assert default_cap(plan_of(option(1, "g5.xlarge", 1, 10_000.0)))[0] == 25.0


def test_bench_over_the_cap_is_refused_in_one_line():
    top = option(1, "p4d.24xlarge", 2, 1000.0, hourly=60.0)
    choice = choose(plan_of(top), max_minutes=15.0)   # bound $60/h x (15 + 5 billed start) min = $20 < $50
    assert choice.refusal is None
    refused = choose(plan_of(top), max_minutes=15.0, max_usd=10.0)
    assert refused.refusal is not None and "\n" not in refused.refusal
    assert "$20.00" in refused.refusal and "--max-usd" in refused.refusal


def test_value_rule_keeps_the_layouts_the_cap_holds_in_rank_order():
    layouts = [option(i + 1, t, 1, 100.0 + i) for i, t in enumerate(("g5.xlarge", "g6.xlarge", "g5.2xlarge"))]
    choice = choose(plan_of(*layouts), max_minutes=15.0, max_usd=1.5)   # each bound $2 x 20/60 = $0.67
    assert [c.option.instance_type for c in choice.chosen] == ["g5.xlarge", "g6.xlarge"]
    assert choice.refusal is None and "over the --max-usd" in choice.skipped[0].reason
    assert choose(plan_of(*layouts), max_usd=0.5).refusal is not None   # not even the top fits


def test_a_two_node_pair_per_transport_where_communication_matters():
    transport = {"sagemaker": "tcp", "ec2": "efa"}
    four = option(1, "g5.12xlarge", 4, 100.0, platform="ec2")          # worth measuring: its network matters
    pair_efa = option(2, "g5.12xlarge", 2, 150.0, platform="ec2", band=(99.0, 101.0))   # not worth by itself
    pair_tcp = option(3, "g5.12xlarge", 2, 151.0, platform="sagemaker", band=(99.0, 101.0))
    choice = choose(plan_of(four, pair_efa, pair_tcp), max_usd=100.0,
                    transport_of=lambda o: transport[o.platform])
    got = [(c.option.count, c.option.platform) for c in choice.chosen]
    # the 4-node layout itself covers EFA; the 2-node pair adds the TCP network of SageMaker
    assert got == [(4, "ec2"), (2, "sagemaker")]
    assert "2-node pair: the tcp network" in choice.chosen[1].reason
