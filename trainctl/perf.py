"""Pure arithmetic: ranks and memory fit per layout, step time with communication overlapped, and its inverse.

No I/O, no clock. Every figure comes with the words that explain it, because a plan that cannot
say why it believes a number is not worth trusting with a GPU bill. The reasoning and the sources
of the constants are written out in docs/cost-model.md. The links and collectives are in
perf_network.py; the calibrated compute rate of one rank is in perf_fit.py.

The unit of parallelism is the rank, as torchrun starts it: one per GPU, one per NeuronCore on Trainium
(2 per chip: trn1.32xlarge runs 32 ranks of 16 GiB each). Batch, memory and throughput per accelerator
are all per rank.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from trainctl.catalog import Calibration, InstanceType
from trainctl.perf_network import Fabric, fsdp_sync_seconds, gradient_sync_seconds, hsdp_sync_seconds

GIB = 1024**3

# Share of accelerator memory left for the training process (CUDA/Neuron runtime, allocator slack).
USABLE_MEMORY_FRACTION = 0.90
# PyTorch DDP's default gradient bucket: the last bucket's all-reduce cannot hide behind backward.
DDP_BUCKET_BYTES = 25 * 1024**2
# ddp: replicated; fsdp: sharded over every rank; hsdp: sharded within a node, replicated across nodes.
SHARDED = ("fsdp", "hsdp")


@dataclass(frozen=True)
class ModelShape:
    """What perf needs to know about the model (built from the spec by the planner)."""

    params: float
    training_flops_per_sample: float
    precision: str               # bf16 | fp16 | fp32
    optimizer: str               # adam | adamw | sgd | sgd-momentum
    activation_bytes_per_sample: float | None  # None: unknown
    hidden: int | None = None    # transformer width; None: estimated from params (perf_fit.py)
    tokens: int | None = None    # sequence length (patches + class token for ViT)
    layers: int | None = None
    heads: int | None = None
    family: str | None = None    # vision | language
    vocab: int | None = None     # output classes per token (language models): the logits buffer


@dataclass(frozen=True)
class Ranks:
    """What one rank (a GPU, or a NeuronCore) of an instance type is."""

    per_node: int
    memory_gib: float
    unit: str                    # GPU | NeuronCore
    per_accelerator: int         # ranks per chip: 1 on GPUs, 2 on Trainium1


def ranks(instance: InstanceType, calibration: Calibration) -> Ranks:
    """torchrun's processes per node: one per GPU, one per NeuronCore (backends/ec2.py nproc_per_node,
    the SageMaker toolkit's process count), with the accelerator's memory split between its cores."""
    spec = calibration.device(instance.accelerator.key)
    per_acc = spec.ranks_per_accelerator if spec else 1
    unit = "NeuronCore" if instance.accelerator.kind == "neuron" else "GPU"
    return Ranks(instance.accelerator_count * per_acc, instance.accelerator_memory_gib / per_acc, unit, per_acc)


# ----------------------------------------------------------------------------- memory
def state_bytes_per_param(optimizer: str) -> float:
    """fp32 weights and gradients (autocast keeps fp32 master weights) plus optimizer state."""
    optimizer_bytes = {"adam": 8.0, "adamw": 8.0, "sgd-momentum": 4.0, "sgd": 0.0}[optimizer]
    return 4.0 + 4.0 + optimizer_bytes


def transformer_activation_bytes(tokens: int, hidden: int, heads: int, layers: int, precision: str,
                                 checkpointing: bool, fused_attention: bool = True) -> float:
    """Activation memory of one sample (Korthikanti et al. 2022, eq. 1: s*h*(34 + 5*a*s/h) bytes per layer
    in 16-bit). The 5*a*s/h term is the attention scores, softmax and dropout mask (a x s^2 per layer): fused
    attention (PyTorch's scaled_dot_product_attention on GPUs, FlashAttention) never keeps them, which leaves
    34*s*h, the paper's eq. 2 without tensor parallelism. With activation checkpointing only each layer's
    input is kept, plus one layer's full set."""
    scores = 0.0 if fused_attention else 5 * heads * tokens / hidden
    per_layer = tokens * hidden * (34 + scores)
    scale = 2.0 if precision == "fp32" else 1.0
    if checkpointing:
        return scale * (layers * 2 * tokens * hidden + per_layer)
    return scale * layers * per_layer


def _compute_bytes(precision: str) -> float:
    return 4.0 if precision == "fp32" else 2.0


def logits_bytes_per_sample(model: ModelShape) -> float:
    """The output layer's buffer of one sample: tokens x vocabulary logits in the compute precision, their
    fp32 copy for the loss and the fp32 log-softmax (the size of the gradient that flows back); 0 without a
    vocabulary (vision: one row of classes per sample, negligible)."""
    if not model.vocab or not model.tokens:
        return 0.0
    return model.tokens * model.vocab * (_compute_bytes(model.precision) + 4.0 + 4.0)


def unsharded_layer_bytes(model: ModelShape, strategy: str) -> float:
    """Sharded training all-gathers one layer's parameters to compute it and prefetches the next one's (two
    layers of 16-bit parameters), and holds that layer's unsharded gradients (fp32, the reduce precision)
    until they are reduce-scattered. DDP already counts the whole model in its state."""
    if strategy not in SHARDED:
        return 0.0
    layer = model.params / max(1, model.layers or 1)
    return layer * (2 * _compute_bytes(model.precision) + 4.0)


@dataclass(frozen=True)
class MemoryFit:
    strategy: str                     # ddp | fsdp | hsdp
    state_gib: float                  # weights + grads + optimizer state per accelerator
    activation_gib: float | None      # per accelerator for the micro-batch, None when unknown
    usable_gib: float
    fits: bool
    min_accelerators_sharded: int | None  # with fsdp, fewest accelerators that hold it; None: never fits
    micro_batch: int = 1              # samples per rank per forward/backward
    grad_accum: int = 1               # micro-batches per optimizer step
    working_gib: float = 0.0          # logits buffer and the unsharded layer being computed

    @property
    def total_gib(self) -> float:
        return self.state_gib + (self.activation_gib or 0.0) + self.working_gib


def micro_batches(batch: int, accumulate: bool) -> list[int]:
    """The micro-batches that split `batch` evenly, largest first (only `batch` itself without accumulation)."""
    if not accumulate:
        return [batch]
    return [m for m in range(batch, 0, -1) if batch % m == 0]


def memory_fit(model: ModelShape, rank_memory_gib: float, total_accelerators: int, batch_per_accelerator: int,
               strategy: str, ranks_per_node: int | None = None, accumulate: bool = False) -> MemoryFit:
    """Memory per rank under `strategy` ('ddp', 'fsdp', 'hsdp', or 'auto': ddp when it fits, else fsdp), at
    the largest micro-batch that fits: with `accumulate`, the per-rank batch of an optimizer step may be split
    into equal micro-batches (gradient accumulation); hsdp shards within a node of `ranks_per_node` ranks."""
    if strategy == "auto":
        ddp = memory_fit(model, rank_memory_gib, total_accelerators, batch_per_accelerator, "ddp",
                         ranks_per_node, accumulate)
        if ddp.fits or total_accelerators == 1:
            return ddp
        return memory_fit(model, rank_memory_gib, total_accelerators, batch_per_accelerator, "fsdp",
                          ranks_per_node, accumulate)
    usable = rank_memory_gib * USABLE_MEMORY_FRACTION
    full_state = model.params * state_bytes_per_param(model.optimizer) / GIB
    ways = {"ddp": 1, "fsdp": total_accelerators,
            "hsdp": min(total_accelerators, ranks_per_node or total_accelerators)}[strategy]
    state = full_state / ways
    layer = unsharded_layer_bytes(model, strategy) / GIB
    fit = None
    for micro in micro_batches(batch_per_accelerator, accumulate):
        act = None if model.activation_bytes_per_sample is None else \
            model.activation_bytes_per_sample * micro / GIB
        working = layer + logits_bytes_per_sample(model) * micro / GIB
        # Fewest accelerators that hold a fully sharded model (states split; activations and buffers not).
        room = usable - (act or 0.0) - working - (unsharded_layer_bytes(model, "fsdp") / GIB - layer)
        min_sharded = math.ceil(full_state / room) if room > 0 else None
        fit = MemoryFit(strategy, state, act, usable, state + (act or 0.0) + working <= usable, min_sharded,
                        micro, batch_per_accelerator // micro, working)
        if fit.fits:
            return fit
    return fit


# ----------------------------------------------------------------------------- throughput
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


def _comm_and_tail(model: ModelShape, fab: Fabric, nodes: int, strategy: str) -> tuple[float, float]:
    """(communication seconds per optimizer step, the part that cannot overlap with compute)."""
    if strategy in SHARDED:
        sync = fsdp_sync_seconds if strategy == "fsdp" else hsdp_sync_seconds
        comm = sync(model.params, nodes, fab)
        return comm, comm * min(1.0, DDP_BUCKET_BYTES / (2 * model.params))
    grad_bytes = 4.0 * model.params  # fp32 gradients of fp32 master weights
    comm = gradient_sync_seconds(grad_bytes, nodes, fab)
    return comm, comm * min(1.0, DDP_BUCKET_BYTES / grad_bytes)


def _step_seconds(compute: float, comm: float, tail: float, strategy: str) -> float:
    if strategy in SHARDED:
        return max(compute, comm) + tail
    return compute / 3.0 + max(compute * 2.0 / 3.0, comm) + (tail if comm > 0 else 0.0)


def layout_throughput(model: ModelShape, fab: Fabric, nodes: int, batch_per_accelerator: int,
                      per_accelerator_compute: float, strategy: str, accumulation: int = 1) -> Throughput:
    """Step time of data-parallel training with communication overlapped as PyTorch does it.

    DDP all-reduces gradient buckets while backward (2/3 of compute) still runs: the step is
    forward + max(backward, all-reduce) + the last bucket. FSDP prefetches parameters during the
    whole step: max(compute, communication) + one layer's worth, approximated by the same tail.
    With gradient accumulation DDP synchronises once per `accumulation` micro-batches; FSDP gathers its
    parameters for every micro-batch (its default), so its communication repeats with each one.
    """
    batch = batch_per_accelerator * accumulation
    comm, tail = _comm_and_tail(model, fab, nodes, strategy)
    compute = batch / per_accelerator_compute
    if strategy in SHARDED:
        step = accumulation * _step_seconds(compute / accumulation, comm, tail, strategy)
        comm *= accumulation
    else:
        step = _step_seconds(compute, comm, tail, strategy)
    link = None
    if nodes > 1 and fab.inter is not None:
        link = fab.inter.describe
    elif fab.ranks_per_node > 1:
        link = fab.intra.describe
    total = nodes * fab.ranks_per_node
    return Throughput(samples_per_s=total * batch / step, per_accelerator_compute=per_accelerator_compute,
                      step_seconds=step, compute_seconds=compute, comm_seconds=comm,
                      exposed_comm_seconds=step - compute, bottleneck_link=link)


def invert_compute_rate(model: ModelShape, fab: Fabric, nodes: int, batch_per_accelerator: int,
                        layout_samples_per_s: float, strategy: str, accumulation: int = 1,
                        max_rate: float = math.inf) -> float:
    """The per-rank compute rate that `layout_throughput` turns into the measured layout throughput.

    A measured step is compute plus whatever communication the overlap leaves exposed; the compute rate is
    what remains after taking out the modelled communication of the layout it was measured on. The step is
    a strictly increasing function of compute time, so the inverse is unique; where the measurement is faster
    than the modelled communication alone allows, the model's network is too pessimistic for it and the whole
    step is taken as compute (the measurement wins). A step that is almost all exposed communication leaves
    little compute, and a rate that no accelerator reaches: `max_rate` (the rank's peak) caps it."""
    batch = batch_per_accelerator * accumulation
    total = nodes * fab.ranks_per_node
    step = total * batch / layout_samples_per_s
    comm, tail = _comm_and_tail(model, fab, nodes, strategy)
    if strategy in SHARDED:
        micro_step = step / accumulation
        compute = micro_step - tail if micro_step - tail >= comm else micro_step
        compute *= accumulation
    elif comm == 0:
        compute = step
    elif step - tail >= comm * 1.5:          # backward (2/3 of compute) hides the all-reduce
        compute = step - tail
    elif step - comm - tail > 0:             # exposed: step = compute/3 + comm + tail
        compute = 3.0 * (step - comm - tail)
    else:
        compute = step
    return min(batch / compute, max_rate)
