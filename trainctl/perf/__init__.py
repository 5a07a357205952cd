"""Pure estimates of one layout: memory fit, step time, network, the calibrated compute rate, the input pipeline.

No I/O and no clock: everything here is arithmetic over the catalog's data. `from trainctl import perf` gives
the memory and step-time functions most callers need; the other modules are imported by name:
`memory` (the model's shape, ranks, what fits), `step_time` (overlap of compute and communication, and its
inverse), `network` (links, collectives, burst credits), `compute_rate` (the calibrated rate of one rank, with
its band), `estimator` (throughput of a layout: measured > given > modelled), `input_pipeline` (CPU caps).
"""
from trainctl.perf.memory import (GIB, SHARDED, USABLE_MEMORY_FRACTION, MemoryFit, ModelShape, Ranks,
                                  layer_params, logits_bytes_per_sample, memory_fit, micro_batches, ranks, state_bytes_per_param,
                                  transformer_activation_bytes, unsharded_layer_bytes)
from trainctl.perf.step_time import DDP_BUCKET_BYTES, Throughput, invert_compute_rate, layout_throughput

__all__ = ["DDP_BUCKET_BYTES", "GIB", "SHARDED", "USABLE_MEMORY_FRACTION", "MemoryFit", "ModelShape", "Ranks",
           "Throughput", "invert_compute_rate", "layer_params", "layout_throughput", "logits_bytes_per_sample", "memory_fit",
           "micro_batches", "ranks", "state_bytes_per_param", "transformer_activation_bytes", "unsharded_layer_bytes"]
