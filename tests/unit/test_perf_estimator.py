"""A bench's measurement in the plan (perf/estimator.py): named as a bench's; a short bench of several "up to"
nodes saw burst bandwidth and is not applied as-is to a long run's network term."""
from __future__ import annotations

import pytest

from tests.support.helpers import CONFIGS
from trainctl.catalog import load_catalog
from trainctl.planner import MeasuredRate, PlanRequest, plan
from trainctl.planner.quotes import Quotes
from trainctl.spec import JobSpec, Layout, load_spec
from trainctl.usecases.bench.record import regime

CAT = load_catalog()
KEY = ("vit_base_patch16_224", 128, "g5.2xlarge")


def _four_nodes(measured: MeasuredRate, samples: int):
    data = load_spec(CONFIGS / "vit-base-g5.yaml").model_dump()
    data["workload"] = {**data["workload"], "samples": samples, "epochs": None, "dataset_size": None}
    spec = JobSpec.model_validate(data)
    req = PlanRequest(layouts=(Layout.parse("g5.2xlarge:4:on-demand"),), platforms=("ec2",))
    p = plan(spec, CAT, Quotes.offline(spec.candidates.regions), req, {KEY: measured})
    return next(o for o in p.options if o.count == 4)


def test_a_burst_bench_does_not_make_a_long_run_as_fast_as_its_first_minutes():
    long_run = 20_000_000   # hours of training: almost all of it at the baseline bandwidth
    # 600 samples/s on 4 x g5.2xlarge: about what the model gives at burst (docs/cost-model.md, 681)
    sustained = _four_nodes(MeasuredRate(600.0, 4, "bench-1", origin="bench job bench-1", network="unknown"),
                            long_run)
    burst = _four_nodes(MeasuredRate(600.0, 4, "bench-1", origin="bench job bench-1", network="burst"), long_run)
    assert sustained.throughput_samples_per_s == 600.0 and sustained.network_assumed == "as measured"
    assert burst.throughput_source == "measured" and burst.network_assumed == "burst, then baseline"
    assert burst.throughput_samples_per_s < 600.0
    assert any("measured by bench job bench-1" in w for w in burst.why)


def test_a_burst_bench_is_applied_as_is_to_a_run_within_the_burst_window():
    short = _four_nodes(MeasuredRate(600.0, 4, "bench-1", network="burst"), 100_000)
    assert short.throughput_samples_per_s == pytest.approx(600.0, rel=0.02)


def test_network_regime_of_a_bench():
    assert regime(True, 1, 60) == "none"
    assert regime(False, 4, 60) == "sustained"
    assert regime(True, 4, 120) == "burst"
    assert regime(True, 4, 3600) == "unknown"
    assert regime(True, 4, None) == "unknown"


def test_an_fp32_measurement_with_tf32_on_is_neither_quarantined_nor_capped_at_the_fp32_peak():
    """ViT-B/16 in fp32, TF32 not said by the spec, measured on one p4d.24xlarge at 3,030 samples/s: 40 TFLOPS per
    A100 (105.6 GFLOPs per sample), possible with TF32 (156 dense), twice the fp32 peak (19.5). It is the plan's
    throughput as measured; it was quarantined as 'above the peak' when the bound was the fp32 one (2,216/s)."""
    data = load_spec(CONFIGS / "vit-base-g5.yaml").model_dump()
    data["model"] = {**data["model"], "precision": "fp32"}
    spec = JobSpec.model_validate(data)
    req = PlanRequest(layouts=(Layout.parse("p4d.24xlarge:1:on-demand"),), platforms=("ec2",))
    key = ("vit_base_patch16_224", 128, "p4d.24xlarge")
    p = plan(spec, CAT, Quotes.offline(spec.candidates.regions), req, {key: MeasuredRate(3030.0, 1, "bench-2")})
    option = next(o for o in p.options if o.count == 1)
    assert option.throughput_source == "measured" and option.throughput_samples_per_s == pytest.approx(3030.0)
    assert not any("quarantined" in w for w in [*p.warnings, *option.why])
