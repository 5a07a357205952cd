"""Pure arithmetic: throughput per layout, all-reduce time over its network, memory fit.

No I/O, no clock. Every figure comes with the words that explain it, because a plan that cannot
say why it believes a number is not worth trusting with a GPU bill. The reasoning and the sources
of the constants are written out in docs/cost-model.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from trainctl.catalog import InstanceType

GIB = 1024**3

# Share of accelerator memory left for the training process (CUDA/Neuron runtime, allocator slack).
USABLE_MEMORY_FRACTION = 0.90
# NCCL over plain TCP sockets rarely sustains more than ~70% of the line rate; EFA (libfabric) ~90%.
TCP_LINK_EFFICIENCY = 0.70
EFA_LINK_EFFICIENCY = 0.90
# Per-hop latency of one ring step.
TCP_HOP_LATENCY_S = 50e-6
EFA_HOP_LATENCY_S = 15e-6
INTRA_HOP_LATENCY_S = 5e-6
# PyTorch DDP's default gradient bucket: the last bucket's all-reduce cannot hide behind backward.
DDP_BUCKET_BYTES = 25 * 1024**2


@dataclass(frozen=True)
class ModelShape:
    """What perf needs to know about the model (built from the spec by the planner)."""

    params: float
    training_flops_per_sample: float
    precision: str               # bf16 | fp16 | fp32
    optimizer: str               # adam | adamw | sgd | sgd-momentum
    activation_bytes_per_sample: float | None  # None: unknown


# ----------------------------------------------------------------------------- memory
def state_bytes_per_param(optimizer: str) -> float:
    """fp32 weights and gradients (autocast keeps fp32 master weights) plus optimizer state."""
    optimizer_bytes = {"adam": 8.0, "adamw": 8.0, "sgd-momentum": 4.0, "sgd": 0.0}[optimizer]
    return 4.0 + 4.0 + optimizer_bytes


def transformer_activation_bytes(tokens: int, hidden: int, heads: int, layers: int, precision: str,
                                 checkpointing: bool) -> float:
    """Activation memory of one sample (Korthikanti et al. 2022, eq. 1: s*h*(34 + 5*a*s/h) bytes per layer
    in 16-bit). With activation checkpointing only each layer's input is kept, plus one layer's full set."""
    per_layer = tokens * hidden * (34 + 5 * heads * tokens / hidden)
    scale = 2.0 if precision == "fp32" else 1.0
    if checkpointing:
        return scale * (layers * 2 * tokens * hidden + per_layer)
    return scale * layers * per_layer


@dataclass(frozen=True)
class MemoryFit:
    strategy: str                     # ddp | fsdp
    state_gib: float                  # weights + grads + optimizer state per accelerator
    activation_gib: float | None      # per accelerator for the batch, None when unknown
    usable_gib: float
    fits: bool
    min_accelerators_sharded: int | None  # with fsdp, fewest accelerators that hold it; None: never fits

    @property
    def total_gib(self) -> float:
        return self.state_gib + (self.activation_gib or 0.0)


def memory_fit(model: ModelShape, instance: InstanceType, total_accelerators: int, batch_per_accelerator: int,
               strategy: str) -> MemoryFit:
    """Memory per accelerator under `strategy` ('ddp', 'fsdp' or 'auto': ddp when it fits, else fsdp)."""
    usable = instance.accelerator_memory_gib * USABLE_MEMORY_FRACTION
    full_state = model.params * state_bytes_per_param(model.optimizer) / GIB
    act = None if model.activation_bytes_per_sample is None else \
        model.activation_bytes_per_sample * batch_per_accelerator / GIB
    act_or_0 = act or 0.0
    # Fewest accelerators that hold a fully sharded model (states split, activations not).
    room = usable - act_or_0
    min_sharded = math.ceil(full_state / room) if room > 0 else None

    def fit(strat: str) -> MemoryFit:
        state = full_state if strat == "ddp" else full_state / total_accelerators
        return MemoryFit(strat, state, act, usable, state + act_or_0 <= usable, min_sharded)

    if strategy == "auto":
        ddp = fit("ddp")
        return ddp if ddp.fits or total_accelerators == 1 else fit("fsdp")
    return fit(strategy)


# ----------------------------------------------------------------------------- network
@dataclass(frozen=True)
class Link:
    gbytes_per_s: float   # effective payload bandwidth
    hop_latency_s: float
    describe: str


def inter_node_link(instance: InstanceType) -> Link:
    """The node's network as NCCL sees it over many hours of training.

    'Up to' links only sustain their baseline: the burst lasts minutes, a training run lasts hours.
    """
    if instance.efa:
        gbps, eff, lat = instance.network_gbps_burst, EFA_LINK_EFFICIENCY, EFA_HOP_LATENCY_S
        words = f"{gbps:g} Gbps EFA"
    else:
        gbps, eff, lat = instance.network_gbps_baseline, TCP_LINK_EFFICIENCY, TCP_HOP_LATENCY_S
        words = f"{gbps:g} Gbps TCP" + (f" baseline ({instance.network_gbps_burst:g} burst lasts minutes)"
                                        if instance.network_up_to else "")
    return Link(gbps * eff / 8.0, lat, words)


def intra_node_link(instance: InstanceType) -> Link:
    return Link(instance.accelerator.intra_node_gbytes_s, INTRA_HOP_LATENCY_S,
                f"{instance.accelerator.intra_node_gbytes_s:g} GB/s between {instance.accelerator.key}s")


def ring_allreduce_seconds(size_bytes: float, ranks: int, link: Link) -> float:
    """Ring all-reduce: each rank sends and receives 2(n-1)/n of the buffer in 2(n-1) hops."""
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) / ranks * size_bytes / (link.gbytes_per_s * 1e9) + 2 * (ranks - 1) * link.hop_latency_s


def gradient_sync_seconds(size_bytes: float, nodes: int, per_node: int, instance: InstanceType) -> float:
    """Hierarchical all-reduce (as NCCL does across nodes): reduce-scatter inside the node, all-reduce of the
    node's shards across nodes (the node's NIC carries the whole buffer's 2(n-1)/n), all-gather inside."""
    intra = ring_allreduce_seconds(size_bytes, per_node, intra_node_link(instance))
    inter = ring_allreduce_seconds(size_bytes, nodes, inter_node_link(instance))
    return intra + inter


def fsdp_sync_seconds(params: float, nodes: int, per_node: int, instance: InstanceType) -> float:
    """Full sharding moves 16-bit parameters twice (all-gather for forward and backward) and reduce-scatters
    16-bit gradients: 3 x 2 bytes x params x (N-1)/N per rank. Across nodes the NIC is shared by the node's
    ranks, so the slowest link's bandwidth per rank is the NIC's divided by the ranks on the node."""
    n = nodes * per_node
    if n <= 1:
        return 0.0
    volume = 3 * 2 * params * (n - 1) / n
    if nodes > 1:
        link = inter_node_link(instance)
        per_rank_bw = link.gbytes_per_s * 1e9 / per_node
        return volume / per_rank_bw + 3 * (n - 1) * link.hop_latency_s
    link = intra_node_link(instance)
    return volume / (link.gbytes_per_s * 1e9) + 3 * (n - 1) * link.hop_latency_s


# ----------------------------------------------------------------------------- throughput
def modelled_compute_rate(model: ModelShape, instance: InstanceType) -> float:
    """Samples/s of one accelerator with no communication: peak x efficiency / FLOPs per sample."""
    acc = instance.accelerator
    return acc.peak_tflops[model.precision] * 1e12 * acc.efficiency / model.training_flops_per_sample


@dataclass(frozen=True)
class Throughput:
    samples_per_s: float          # the whole layout
    per_accelerator_compute: float
    step_seconds: float
    compute_seconds: float
    comm_seconds: float
    exposed_comm_seconds: float
    bottleneck_link: str | None

    @property
    def scaling_efficiency(self) -> float:
        return self.compute_seconds / self.step_seconds


def layout_throughput(model: ModelShape, instance: InstanceType, nodes: int, batch_per_accelerator: int,
                      per_accelerator_compute: float, strategy: str) -> Throughput:
    """Step time of data-parallel training with communication overlapped as PyTorch does it.

    DDP all-reduces gradient buckets while backward (2/3 of compute) still runs: the step is
    forward + max(backward, all-reduce) + the last bucket. FSDP prefetches parameters during the
    whole step: max(compute, communication) + one layer's worth, approximated by the same tail.
    """
    per_node = instance.accelerator_count
    compute = batch_per_accelerator / per_accelerator_compute
    if strategy == "fsdp":
        comm = fsdp_sync_seconds(model.params, nodes, per_node, instance)
        tail = comm * min(1.0, DDP_BUCKET_BYTES / (2 * model.params))
        step = max(compute, comm) + tail
    else:
        grad_bytes = 4.0 * model.params  # fp32 gradients of fp32 master weights
        comm = gradient_sync_seconds(grad_bytes, nodes, per_node, instance)
        tail = comm * min(1.0, DDP_BUCKET_BYTES / grad_bytes)
        forward, backward = compute / 3.0, compute * 2.0 / 3.0
        step = forward + max(backward, comm) + (tail if comm > 0 else 0.0)
    total_acc = nodes * per_node
    link = None
    if nodes > 1:
        link = inter_node_link(instance).describe
    elif per_node > 1:
        link = intra_node_link(instance).describe
    return Throughput(samples_per_s=total_acc * batch_per_accelerator / step,
                      per_accelerator_compute=per_accelerator_compute, step_seconds=step, compute_seconds=compute,
                      comm_seconds=comm, exposed_comm_seconds=step - compute, bottleneck_link=link)
