"""The performance model, checked against numbers worked out by hand."""
from __future__ import annotations

import pytest

from trainctl import perf
from trainctl.catalog import load_catalog
from trainctl.planner import model_shape
from trainctl.spec import load_spec
from tests.helpers import CONFIGS

CAT = load_catalog()
VIT = model_shape(load_spec(CONFIGS / "vit-base-g5.yaml"))
LLM = model_shape(load_spec(CONFIGS / "llm-7b.yaml"))


def test_ring_allreduce_vit_b16_over_four_g5_2xlarge():
    """ViT-B/16: 86.6M fp32 gradients = 346.4 MB. Ring over 4 nodes moves 2*3/4 of it = 519.6 MB per node.
    g5.2xlarge sustains its 5 Gbps baseline (10 Gbps burst lasts minutes); NCCL over TCP ~70% of it:
    3.5 Gbps = 0.4375 GB/s -> 519.6 / 437.5 = 1.18766 s, plus 6 hops x 50 us = 0.3 ms."""
    inst = CAT.instance("g5.2xlarge")
    t = perf.gradient_sync_seconds(4 * 86.6e6, nodes=4, per_node=1, instance=inst)
    assert t == pytest.approx(1.18766 + 0.0003, rel=1e-4)
    link = perf.inter_node_link(inst)
    assert link.gbytes_per_s == pytest.approx(0.4375)
    assert "5 Gbps TCP baseline" in link.describe


def test_compute_rate_a10g():
    """A10G: 70 TFLOPS bf16 x 40% = 28 TFLOPS; ViT-B/16 training = 3 x 35.2 GFLOP = 105.6 GFLOP per sample
    -> 265.15 samples/s; batch 128 -> 0.4827 s per step."""
    rate = perf.modelled_compute_rate(VIT, CAT.instance("g5.2xlarge"))
    assert rate == pytest.approx(28e12 / 105.6e9)
    tp = perf.layout_throughput(VIT, CAT.instance("g5.2xlarge"), 1, 128, rate, "ddp")
    assert tp.step_seconds == pytest.approx(128 / rate)
    assert tp.comm_seconds == 0 and tp.samples_per_s == pytest.approx(rate)


def test_four_node_step_is_network_bound():
    """fwd (1/3 of 0.4827 s) + max(bwd 0.3218 s, comm 1.1880 s) + last 25 MiB bucket's share of comm."""
    inst = CAT.instance("g5.2xlarge")
    rate = perf.modelled_compute_rate(VIT, inst)
    tp = perf.layout_throughput(VIT, inst, 4, 128, rate, "ddp")
    compute = 128 / rate
    comm = 1.18766 + 0.0003
    tail = comm * (25 * 1024**2) / (4 * 86.6e6)
    assert tp.step_seconds == pytest.approx(compute / 3 + comm + tail, rel=1e-4)
    assert tp.scaling_efficiency < 0.4
    assert tp.samples_per_s == pytest.approx(4 * 128 / tp.step_seconds)


def test_intra_node_g5_12xlarge_overlaps():
    inst = CAT.instance("g5.12xlarge")
    rate = perf.modelled_compute_rate(VIT, inst)
    tp = perf.layout_throughput(VIT, inst, 1, 128, rate, "ddp")
    # 2*3/4 * 346.4 MB over 12 GB/s = 43.3 ms, hidden behind backward except the last bucket
    assert tp.comm_seconds == pytest.approx(0.75 * 2 * 346.4e6 / 12e9 + 6 * 5e-6, rel=1e-6)
    assert tp.scaling_efficiency > 0.98


def test_memory_vit_fits_a10g():
    fit = perf.memory_fit(VIT, CAT.instance("g5.2xlarge"), 1, 128, "auto")
    # 16 bytes/param x 86.6M = 1.29 GiB state; activations ~ 197*768*(34+5*12*197/768) B x 12 layers x 128
    act = 197 * 768 * (34 + 5 * 12 * 197 / 768) * 12 * 128 / 1024**3
    assert fit.state_gib == pytest.approx(86.6e6 * 16 / 1024**3)
    assert fit.activation_gib == pytest.approx(act)
    assert fit.fits and fit.strategy == "ddp"


def test_memory_llm_7b_needs_sharding():
    one = perf.memory_fit(LLM, CAT.instance("g5.2xlarge"), 1, 1, "auto")
    assert not one.fits
    # 6.74e9 x 16 B = 100.4 GiB of state; usable 21.6 GiB minus activations -> at least 5 A10Gs
    assert one.min_accelerators_sharded == 5
    eight = perf.memory_fit(LLM, CAT.instance("p4d.24xlarge"), 8, 1, "auto")
    assert eight.fits and eight.strategy == "fsdp"
    ddp_only = perf.memory_fit(LLM, CAT.instance("p4d.24xlarge"), 8, 1, "ddp")
    assert not ddp_only.fits


def test_fsdp_comm_slower_across_tcp_nodes():
    inst = CAT.instance("g5.2xlarge")
    assert perf.fsdp_sync_seconds(LLM.params, 8, 1, inst) > 100 * perf.fsdp_sync_seconds(
        LLM.params, 1, 8, CAT.instance("p4d.24xlarge"))
