"""Pure arithmetic: what a model is to perf (its shape), the ranks of an instance, and the memory fit per layout.

No I/O, no clock. Every figure comes with the words that explain it, because a plan that cannot
say why it believes a number is not worth trusting with a GPU bill. The reasoning and the sources
of the constants are written out in docs/cost-model.md. The links and collectives are in
perf/network.py; the calibrated compute rate of one rank is in perf/compute_rate.py; step time in
perf/step_time.py.

The unit of parallelism is the rank, as torchrun starts it: one per GPU, one per NeuronCore on Trainium
(2 per chip: trn1.32xlarge runs 32 ranks of 16 GiB each). Batch, memory and throughput per accelerator
are all per rank.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from trainctl.catalog import Calibration, InstanceType

GIB = 1024**3

# Share of accelerator memory left for the training process (CUDA/Neuron runtime, allocator slack).
USABLE_MEMORY_FRACTION = 0.90
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
    hidden: int | None = None    # transformer width; None: estimated from params (perf/compute_rate.py)
    tokens: int | None = None    # sequence length (patches + class token for ViT)
    layers: int | None = None
    heads: int | None = None
    family: str | None = None    # vision | language | cnn
    vocab: int | None = None     # output classes per token (language models): the logits buffer
    stack: str = "amp"           # software stack the throughput model assumes: tuned | amp | compile | auto
    stack_basis: str = "model.stack"   # where the stack came from, in the plan's words
    stack_read: bool = False     # the stack was read from the user's code (model.stack auto): its own band
    tf32: bool | None = None     # fp32 with TF32 allowed (True), not (False), not known (None): read from the code
    tensor_parallel: int = 1     # ranks of one node each layer is split over (the spec's model.tensor_parallel)


@dataclass(frozen=True)
class Ranks:
    """What one rank (a GPU, or a NeuronCore) of an instance type is."""

    per_node: int
    memory_gib: float
    unit: str                    # GPU | NeuronCore
    per_accelerator: int         # ranks per chip: 1 on GPUs, 2 on Trainium1


def ranks(instance: InstanceType, calibration: Calibration) -> Ranks:
    """torchrun's processes per node: one per GPU, one per NeuronCore (backends/ec2/prepare.py nproc_per_node,
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
    fp32 copy for the loss and the fp32 log-softmax (the size of the gradient that flows back), as eager PyTorch
    keeps them; under torch.compile the logits alone (karpathy/nanochat trains its depth-20 GPT at batch 32 x 2,048
    tokens, vocabulary 65,536, on 80 GB H100s: 10 bytes a logit would not fit); 0 without a vocabulary (vision: one
    row of classes per sample, negligible)."""
    if not model.vocab or not model.tokens:
        return 0.0
    if model.stack == "compile":
        # torch.compile's partitioner saves the cheapest tensors and recomputes fused pointwise and softmax work in
        # the backward (PyTorch dev-discuss, "Min-cut optimal recomputation with AOTAutograd"): only the logits stay
        return model.tokens * model.vocab * _compute_bytes(model.precision)
    return model.tokens * model.vocab * (_compute_bytes(model.precision) + 4.0 + 4.0)


# A model given only by params and FLOPs has no layer count. A transformer has ~12 h^2 parameters per layer and
# params ~ 0.12 h^3 (published LMs keep ~100 of width per layer: LLaMA-7B 4096/32, GPT-3 12288/96), so ~h/100
# layers. FSDP's unsharded layer is then taken twice that big (fewer, larger layers than usual: conservative),
# never more than the whole model. ASSUMED; the plan says so. (Counting the whole model as the one layer refused
# a custom 7B model on 8 x A100 40GB, where the same model named llama-7b fits.)
PARAMS_PER_WIDTH_CUBED = 0.12
UNKNOWN_LAYER_FACTOR = 2.0


def layer_params(model: ModelShape) -> float:
    """Parameters of the largest layer FSDP gathers at once."""
    if model.layers:
        return model.params / model.layers
    width = (model.params / PARAMS_PER_WIDTH_CUBED) ** (1.0 / 3.0)
    return min(model.params, UNKNOWN_LAYER_FACTOR * 12.0 * width * width)


def unsharded_layer_bytes(model: ModelShape, strategy: str) -> float:
    """Sharded training all-gathers one layer's parameters to compute it and prefetches the next one's (two
    layers of 16-bit parameters), and holds that layer's unsharded gradients (fp32, the reduce precision)
    until they are reduce-scattered. DDP already counts the whole model in its state."""
    if strategy not in SHARDED:
        return 0.0
    return layer_params(model) * (2 * _compute_bytes(model.precision) + 4.0)


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
    # Tensor parallelism splits every layer (weights, their states, and with sequence parallelism the activations
    # and the vocabulary-parallel logits) over `tp` ranks; ddp and the sharding strategies act on the data-parallel
    # groups of what is left (Korthikanti et al. 2022: activations s*b*h*34/t per layer with sequence parallelism).
    tp = model.tensor_parallel
    full_state = model.params * state_bytes_per_param(model.optimizer) / GIB / tp
    dp = max(1, total_accelerators // tp)
    ways = {"ddp": 1, "fsdp": dp, "hsdp": max(1, min(total_accelerators, ranks_per_node or total_accelerators) // tp)}[
        strategy]
    state = full_state / ways
    layer = unsharded_layer_bytes(model, strategy) / GIB / tp
    fit = None
    for micro in micro_batches(batch_per_accelerator, accumulate):
        act = None if model.activation_bytes_per_sample is None else \
            model.activation_bytes_per_sample * micro / GIB / tp
        working = layer + logits_bytes_per_sample(model) * micro / GIB / tp
        # Fewest accelerators that hold a fully sharded model (states split; activations and buffers not).
        room = usable - (act or 0.0) - working - (unsharded_layer_bytes(model, "fsdp") / GIB / tp - layer)
        min_sharded = math.ceil(full_state / room) * tp if room > 0 else None
        fit = MemoryFit(strategy, state, act, usable, state + (act or 0.0) + working <= usable, min_sharded,
                        micro, batch_per_accelerator // micro, working)
        if fit.fits:
            return fit
    return fit
