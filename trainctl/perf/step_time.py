"""Pure arithmetic: step time of data-parallel training with communication overlapped, and its inverse.

The links and collectives are in perf/network.py; the model's shape and the memory fit in perf/memory.py.
The reasoning and the sources of the constants are written out in docs/cost-model.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from trainctl.perf.memory import SHARDED, ModelShape
from trainctl.perf.network import (Fabric, fsdp_sync_seconds, gradient_sync_seconds, hsdp_sync_seconds,
                                   ring_allreduce_seconds)

# PyTorch DDP's default gradient bucket: the last bucket's all-reduce cannot hide behind backward.
DDP_BUCKET_BYTES = 25 * 1024**2

@dataclass(frozen=True)
class Throughput:
    samples_per_s: float          # the whole layout
    per_accelerator_compute: float
    step_seconds: float
    compute_seconds: float
    comm_seconds: float
    exposed_comm_seconds: float
    bottleneck_link: str | None
    tensor_parallel_seconds: float = 0.0   # per optimizer step, inside the node, not overlapped

    @property
    def scaling_efficiency(self) -> float:
        return self.compute_seconds / self.step_seconds


def tensor_parallel_seconds(model: ModelShape, fab: Fabric, micro_batch: int) -> float:
    """One micro-batch's tensor-parallel collectives: with sequence parallelism each layer all-gathers and
    reduce-scatters its activations twice forward and twice backward, the traffic of four ring all-reduces of
    micro-batch x tokens x hidden activations among the layer's t ranks (Korthikanti et al. 2022, section 4.2.2),
    on the node's own link and on the critical path (each needs the last one's result). 0 without tensor
    parallelism or without the shape (the spec requires one with it)."""
    t = model.tensor_parallel
    if t <= 1 or not (model.layers and model.hidden and model.tokens):
        return 0.0
    size = micro_batch * model.tokens * model.hidden * (4.0 if model.precision == "fp32" else 2.0)
    return model.layers * 4 * ring_allreduce_seconds(size, t, fab.intra)


def _data_parallel(model: ModelShape, fab: Fabric) -> tuple[ModelShape, Fabric]:
    """What the data-parallel collectives see under tensor parallelism: each rank's 1/t of the parameters, and the
    ranks of a node that hold the same share (one per tensor-parallel group)."""
    t = model.tensor_parallel
    if t <= 1:
        return model, fab
    return replace(model, params=model.params / t), replace(fab, ranks_per_node=max(1, fab.ranks_per_node // t))


def _comm_and_tail(model: ModelShape, fab: Fabric, nodes: int, strategy: str) -> tuple[float, float]:
    """(communication seconds per optimizer step, the part that cannot overlap with compute)."""
    model, fab = _data_parallel(model, fab)
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
    # per_accelerator_compute is whole samples per second of one rank's compute; under tensor parallelism a rank
    # computes 1/t of each of its group's samples, and t ranks share one batch
    t = model.tensor_parallel
    compute = batch / (per_accelerator_compute * t)
    tp_s = accumulation * tensor_parallel_seconds(model, fab, batch_per_accelerator)
    if strategy in SHARDED:
        step = accumulation * _step_seconds(compute / accumulation, comm, tail, strategy)
        comm *= accumulation
    else:
        step = _step_seconds(compute, comm, tail, strategy)
    step += tp_s
    link = None
    if nodes > 1 and fab.inter is not None:
        link = fab.inter.describe
    elif fab.ranks_per_node > 1:
        link = fab.intra.describe
    groups = nodes * fab.ranks_per_node / t
    return Throughput(samples_per_s=groups * batch / step, per_accelerator_compute=per_accelerator_compute,
                      step_seconds=step, compute_seconds=compute, comm_seconds=comm + tp_s,
                      exposed_comm_seconds=step - compute, bottleneck_link=link, tensor_parallel_seconds=tp_s)


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
    t = model.tensor_parallel
    groups = nodes * fab.ranks_per_node / t
    step = groups * batch / layout_samples_per_s
    # the tensor-parallel collectives are not overlapped: the rest of the step is what the data-parallel model saw
    step = max(step - accumulation * tensor_parallel_seconds(model, fab, batch_per_accelerator), step * 1e-3)
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
    return min(batch / compute / t, max_rate)
