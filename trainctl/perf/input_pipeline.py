"""Pure: can a node's CPUs feed its accelerators? CPU seconds per sample of the job's data source
against the vCPUs per accelerator; a layout limited by its input is flagged and its throughput capped.

Per-sample CPU costs were measured with scripts/bench_input.py (one thread, as one DataLoader worker
runs), 2026-11-23, AMD EPYC (2 vCPUs), torch 2.14.1, torchvision 0.29.1, Pillow 13.0.0; the assumption
that one EC2 vCPU does the same work per second as one thread there is stated in docs/cost-model.md.
"""
from __future__ import annotations

from dataclasses import dataclass

# CPU seconds per 224x224 RGB sample (scripts/bench_input.py, see the module docstring):
# - device: the bundled entrypoints make synthetic batches on the accelerator itself: no CPU work;
# - cpu-synthetic: torch.randn(3,224,224) + label in a Dataset (the reference experiment's loop): 0.79 ms;
# - jpeg: decode a 500x375 JPEG + RandomResizedCrop(224) + flip + ToTensor + Normalize (torchvision's
#   ImageNet training transform): 5.9 ms, i.e. ~170 samples/s per thread, the order of PIL's
#   published ImageNet loading rates (one to two hundred images per second per core).
CPU_SECONDS_PER_SAMPLE = {"device": 0.0, "cpu-synthetic": 0.000789, "jpeg": 0.005919}
REFERENCE_PIXELS = 224 * 224
# Each accelerator's training process keeps one vCPU busy launching kernels and running the optimizer step;
# DataLoader workers get the rest (the bundled entrypoint's default: cpus / local ranks workers).
VCPUS_PER_TRAINING_PROCESS = 1


@dataclass(frozen=True)
class InputCapacity:
    source: str
    samples_per_s: float | None   # what the node's CPUs can feed (None: no CPU work, no limit)
    workers_vcpus: int

    def words(self, per_node_demand: float) -> str:
        if self.samples_per_s is None:
            return f"input: {self.source} data, no CPU work per sample"
        share = per_node_demand / self.samples_per_s if self.samples_per_s else float("inf")
        return (f"input: {self.source} data needs {share:.0%} of the {self.workers_vcpus} vCPUs left for loading "
                f"({self.samples_per_s:,.0f} samples/s per node at most)")


def cpu_seconds_per_sample(source: str, pixels: float | None = None) -> float:
    """CPU cost of one sample; image work scales with the pixels of the sample (224x224 measured)."""
    base = CPU_SECONDS_PER_SAMPLE[source]
    if pixels is None or source == "device":
        return base
    return base * pixels / REFERENCE_PIXELS


def node_capacity(source: str, vcpus: int, accelerators_per_node: int, pixels: float | None = None,
                  cost_scale: float = 1.0) -> InputCapacity:
    """Samples per second one node's loaders can produce (cost_scale > 1: a slower CPU, for sensitivity)."""
    per_sample = cpu_seconds_per_sample(source, pixels) * cost_scale
    workers = max(1, vcpus - VCPUS_PER_TRAINING_PROCESS * accelerators_per_node)
    if per_sample <= 0:
        return InputCapacity(source, None, workers)
    return InputCapacity(source, workers / per_sample, workers)


def capped_throughput(model_samples_per_s: float, nodes: int, capacity: InputCapacity) -> tuple[float, bool]:
    """(layout samples/s after the input limit, whether the input is what limits it)."""
    if capacity.samples_per_s is None:
        return model_samples_per_s, False
    limit = capacity.samples_per_s * nodes
    return (limit, True) if limit < model_samples_per_s else (model_samples_per_s, False)
