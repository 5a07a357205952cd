"""Whether a layout holds the job in memory: the one check the plan makes (planner/ranking.py) and the model's
evaluation repeats for every published row (scripts/eval_model.py), so that a published run the plan would refuse is
counted as refused, not scored at a rate the plan never states."""
from __future__ import annotations

from trainctl import perf
from trainctl.spec import JobSpec


def memory_fits(spec: JobSpec, shape: perf.ModelShape, rank_memory_gib: float, nodes: int,
                ranks_per_node: int) -> tuple[list[perf.MemoryFit], perf.MemoryFit]:
    """(the fits to choose from, the spec's own strategy's fit: the one an exclusion explains). The ViT and Neuron
    entrypoints replicate the model (DDP) and take no micro-batch; the LM entrypoint shards (full or hybrid) and
    accumulates gradients over micro-batches; a user's script runs the spec's model.strategy."""
    replicated_only = spec.entrypoint.bundled in ("ddp", "neuron")
    strategy = "ddp" if replicated_only else spec.model.strategy
    accumulate = spec.entrypoint.bundled == "lm"
    batch = spec.workload.batch_size_per_accelerator
    n_acc = nodes * ranks_per_node
    fit = perf.memory_fit(shape, rank_memory_gib, n_acc, batch, strategy, ranks_per_node, accumulate)
    fits = [fit] if fit.fits else []
    if fit.strategy == "fsdp" and nodes > 1 and ranks_per_node > 1:
        hybrid = perf.memory_fit(shape, rank_memory_gib, n_acc, batch, "hsdp", ranks_per_node, accumulate)
        fits += [hybrid] if hybrid.fits else []
    return fits, fit
