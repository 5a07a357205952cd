"""The memory model of sharded training, checked by hand: the unsharded layer being computed, the
logits buffer, fused attention (no sequence-squared scores), hybrid sharding (sharded within a node,
replicated across nodes), the largest micro-batch that fits, and the plan choosing full or hybrid sharding
by its modelled communication."""
from __future__ import annotations

import pytest

from tests.support.helpers import CONFIGS
from trainctl import perf
from trainctl.perf import network as perf_network
from trainctl.catalog import load_catalog
from trainctl.planner import model_shape, plan
from trainctl.spec import JobSpec, load_spec

GIB = 1024**3
CAT = load_catalog()
LLM = model_shape(load_spec(CONFIGS / "llm-7b.yaml"))  # llama-7b, bf16, AdamW, activation checkpointing
P4D = CAT.instance("p4d.24xlarge")


def test_fused_attention_keeps_no_scores():
    # Korthikanti et al. eq. 1 per layer: s*h*(34 + 5*a*s/h); fused attention drops the 5*a*s/h term.
    eager = perf.transformer_activation_bytes(2048, 4096, 32, 1, "bf16", False, fused_attention=False)
    fused = perf.transformer_activation_bytes(2048, 4096, 32, 1, "bf16", False)
    assert eager == 2048 * 4096 * (34 + 5 * 32 * 2048 / 4096)   # 1.96 GB: the scores are 70% of it
    assert fused == 2048 * 4096 * 34                            # 285 MB
    # checkpointed: each of the 32 layers keeps its 16-bit input (2*s*h), plus one layer's full set
    assert LLM.activation_bytes_per_sample == 32 * 2 * 2048 * 4096 + 2048 * 4096 * 34 == 822_083_584


def test_logits_buffer_and_unsharded_layer():
    # 2048 tokens x 32,000 logits x (2 B bf16 + 4 B fp32 copy + 4 B fp32 log-softmax/gradient) = 655.36 MB
    assert perf.logits_bytes_per_sample(LLM) == 2048 * 32000 * 10 == 655_360_000
    # one layer (6.74e9 / 32 = 210.6M parameters): this one's and the prefetched one's bf16 parameters, and
    # its fp32 unsharded gradients: 210.625e6 x (2 x 2 + 4) B = 1.685 GB; nothing extra for DDP
    assert perf.unsharded_layer_bytes(LLM, "fsdp") == pytest.approx(6.74e9 / 32 * 8)
    assert perf.unsharded_layer_bytes(LLM, "ddp") == 0.0


def test_largest_micro_batch_that_fits_full_and_hybrid():
    """8 x A100 40 GB, 90% usable = 36 GiB. Full sharding over 8: state 100.43 / 8 = 12.554 GiB, the layer
    1.569 GiB, each sample 0.7656 + 0.6104 = 1.376 GiB. 16 samples: 36.14 GiB > 36 -> micro-batch 8 x 2.
    Over 16 ranks (2 nodes) the state halves (6.277): all 16 fit at once (29.86 GiB). Hybrid over the same 2
    nodes shards within a node only (state / 8 again): micro-batch 8 x 2."""
    one_node = perf.memory_fit(LLM, 40.0, 8, 16, "fsdp", 8, accumulate=True)
    assert (one_node.micro_batch, one_node.grad_accum) == (8, 2)
    assert one_node.state_gib == pytest.approx(6.74e9 * 16 / 8 / GIB)
    assert one_node.total_gib == pytest.approx(12.5542 + 1.5693 + 8 * 1.3760, abs=1e-3)
    two_full = perf.memory_fit(LLM, 40.0, 16, 16, "fsdp", 8, accumulate=True)
    assert (two_full.micro_batch, two_full.grad_accum) == (16, 1)
    assert two_full.total_gib == pytest.approx(6.2771 + 1.5693 + 16 * 1.3760, abs=1e-3)
    two_hybrid = perf.memory_fit(LLM, 40.0, 16, 16, "hsdp", 8, accumulate=True)
    assert two_hybrid.state_gib == pytest.approx(one_node.state_gib)
    assert (two_hybrid.micro_batch, two_hybrid.grad_accum) == (8, 2)
    # without accumulation (the ViT entrypoint) the batch is all or nothing
    assert not perf.memory_fit(LLM, 40.0, 8, 16, "fsdp", 8).fits


def test_hybrid_communication_by_hand():
    """p4d (8 A100, 200 GB/s NVLink, 400 Gbps EFA at 90% = 45 GB/s). Full sharding over 16 ranks: every link
    carries 6 B x 6.74e9 x 15/16 = 37.9 GB at the EFA's 45 GB/s = 0.8425 s (+45 hops x 15 us). Hybrid: the
    node's share, 6 x 6.74e9 x 7/8 = 35.4 GB over NVLink = 0.1769 s (+21 x 5 us), and the fp32 gradients'
    all-reduce across 2 nodes, 4 x 6.74e9 = 26.96 GB x 2 x 1/2 / 45 GB/s = 0.5991 s (+2 x 15 us): hybrid wins
    on 2 nodes. On 4 nodes the all-reduce moves 1.5x as much (0.8987 s) and full sharding wins."""
    two = perf_network.fabric(P4D, 8, 2, "ec2")
    assert perf_network.fsdp_sync_seconds(6.74e9, 2, two) == pytest.approx(0.8425 + 45 * 15e-6)
    assert perf_network.hsdp_sync_seconds(6.74e9, 2, two) == pytest.approx(
        0.176925 + 21 * 5e-6 + 0.599111 + 2 * 15e-6, rel=1e-5)
    four = perf_network.fabric(P4D, 8, 4, "ec2")
    assert perf_network.hsdp_sync_seconds(6.74e9, 4, four) > perf_network.fsdp_sync_seconds(6.74e9, 4, four)


def _llm_plan(layouts: list[str], batch: int):
    data = load_spec(CONFIGS / "llm-7b.yaml").model_dump()
    data["workload"]["batch_size_per_accelerator"] = batch
    data["candidates"].update(layouts=layouts, families=[], platforms=["ec2"], markets=["on-demand"],
                              regions=["us-east-1"])
    spec = JobSpec.model_validate(data)
    from trainctl.planner.quotes import Quotes

    return plan(spec, CAT, Quotes.offline(spec.candidates.regions))  # the catalog's prices, as `plan --offline`


def test_plan_picks_strategy_and_micro_batch_per_layout():
    layouts = ["p4d.24xlarge:1:on-demand", "p4d.24xlarge:2:on-demand", "p4d.24xlarge:4:on-demand"]
    by_count = {o.count: o for o in _llm_plan(layouts, 16).options}
    assert (by_count[1].strategy, by_count[1].micro_batch, by_count[1].grad_accum) == ("fsdp", 8, 2)
    assert any("micro-batch 8 x 2 accumulated" in w for w in by_count[1].why)
    # 2 nodes: hybrid fits only at micro-batch 8 x 2, and FSDP gathers again for every micro-batch: twice its
    # 0.78 s is more than full sharding's one 0.84 s at micro-batch 16
    assert (by_count[2].strategy, by_count[2].micro_batch, by_count[2].grad_accum) == ("fsdp", 16, 1)
    by_count = {o.count: o for o in _llm_plan(layouts, 8).options}
    # at 8 per rank both run one micro-batch: hybrid's shorter communication wins on 2 nodes, not on 4
    assert (by_count[2].strategy, by_count[2].micro_batch, by_count[2].grad_accum) == ("hsdp", 8, 1)
    assert any("within each node" in w for w in by_count[2].why)
    assert by_count[4].strategy == "fsdp"


def test_tensor_parallelism_divides_the_state_activations_logits_and_layer_between_its_ranks():
    """Korthikanti et al. 2022 with sequence parallelism: every per-rank term is 1/t of the replicated one, and
    fully sharding then splits the state over the data-parallel groups (ranks / t), not over every rank."""
    base = dict(params=8.03e9, training_flops_per_sample=1e15, precision="bf16", optimizer="adamw",
                activation_bytes_per_sample=perf.transformer_activation_bytes(8192, 4096, 32, 32, "bf16", False),
                hidden=4096, tokens=8192, layers=32, heads=32, family="language", vocab=128256)
    one, tp = perf.ModelShape(**base), perf.ModelShape(**base, tensor_parallel=32)
    a, b = perf.memory_fit(one, 16.0, 1024, 1, "ddp"), perf.memory_fit(tp, 16.0, 1024, 1, "ddp")
    assert not a.fits and b.fits
    assert b.state_gib == pytest.approx(a.state_gib / 32)
    assert b.activation_gib == pytest.approx(a.activation_gib / 32)
    assert b.working_gib == pytest.approx(a.working_gib / 32)
    full = perf.memory_fit(tp, 16.0, 1024, 1, "fsdp")
    assert full.state_gib == pytest.approx(a.state_gib / 32 / 32)      # 1,024 ranks = 32 groups of 32
