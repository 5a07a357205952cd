"""The compute rate of one rank, calibrated on published training measurements.

Pure: the table is trainctl/catalog/calibration.json (every row names its source and its software stack); this
module fits a handful of numbers to it and predicts any (model, device, precision, stack):

    seconds per sample = [F / (P x e x knee(h))  +  w x c x T / B] x (1 + sync)  +  overhead(layers) / micro-batch

- F: training FLOPs per sample (3 x forward, 4 x with activation checkpointing); P: the device's dense peak.
- e = exp(G[die group] + M[model family] + S[software stack] + I[group/family]): main effects of the die, the
  family (vision transformer, language transformer, convolutional network) and the stack (`tuned`: vendor-tuned
  recipes; `amp`: plain PyTorch with autocast; `compile`: torch.compile), plus the group/family interaction where
  rows of that pair exist (shrunk towards 0 by SHRINK rows). A die without rows takes the median die's effect
  (the least efficient die's, Trainium's, under-predicted V100 and A10 x2.5 when they were left out; the unseen
  band carries the spread), a family without rows the mean of the families. The stack is the one thing a user's spec rarely says: `auto` with nothing read from the code is
  centred between the fitted stacks (the midpoint of the least and most efficient), and the plan's band holds both.
- knee(h) = h / (h + h0) for transformers of width h (small GEMMs keep tensor cores idle); 1 for CNNs.
- c x T / B: the memory traffic of the elementwise work eager PyTorch runs at the bandwidth B, not the peak
  (perf/memory_traffic.py): T = F bytes for a CNN (fp32 twice), a transformer's activation bytes; c fitted per
  kind. A published row that ran eager attention is fitted with its scores' bytes; a plan assumes fused attention
  (what PyTorch 2, Hugging Face and timm run by default). w = 1 for an eager stack (`amp`, and a stack not known:
  PyTorch runs eagerly unless told otherwise); for `tuned` and `compile` the fitted share phi: a vendor recipe's
  fused kernels (apex, Transformer Engine, the Neuron compiler) and torch.compile's Inductor (which fuses chains
  of pointwise operations into one kernel) do not move every activation through memory once per elementwise
  operation, but still write what the backward pass reads and read it back (phi >= 0.25: ASSUMED floor, about
  that write and read of the activations against the ~6 passes the eager stack's fit gives). Fitting the traffic
  on every stack alike had the tuned rows pay it in full, made the eager stack look less efficient than it is,
  and left the leave-one-source-out median at 23.8% (docs/model-accuracy.md gives it now).
- P for fp32: the TF32 peak where TF32 is allowed, as a CNN's cuDNN convolutions are by default (allows_tf32).
- sync: the synchronous data-parallel step's loss (every rank waits for the slowest; stragglers, the data loader
  sharing the host), fitted as the median over published 1-GPU vs n-GPU pairs of the same script and batch after
  the network model has taken its share; applied to every layout of more than one rank.
- overhead: the fixed cost of one eager step (kernel launches, the optimizer's step, loss.item()'s host-device
  sync, the data loader's hand-over): STEP_OVERHEAD_S + LAYER_OVERHEAD_S x layers. ASSUMED (no published row is
  overhead-bound; order of magnitude of CUDA's ~5-10 us per kernel launch x ~20 kernels per layer): it bounds
  tiny models (a 1,218-parameter MLP no longer runs at 200 million samples/s) and costs large ones < 2%.

- SIMT fp32 (fp32 math on the CUDA cores: TF32 off, or a die without it) reaches more of its own peak than the
  tensor cores of theirs: e x gain, gain = (P_16 / P_fp32) ** gamma, the path's rate capped at its peak
  (perf/fp32_math.py; gamma fitted to published TF32 on/off pairs).

The fit of these numbers to the rows: perf/rate_fit.py.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from trainctl import perf
from trainctl.catalog import Calibration, CalibrationRow, Catalog
from trainctl.perf import fp32_math
from trainctl.perf.memory_traffic import cnn_traffic_seconds, layers, transformer_traffic_seconds, width
from trainctl.perf.network import Fabric

SIZE_KNEE_GRID = tuple(range(0, 1201, 100))
# Bytes of memory traffic per training FLOP of a convolutional network (activations, batch norm, elementwise):
# ResNet-50's published rate follows memory bandwidth more than peak across six GPUs (Lambda's table).
CNN_TRAFFIC_GRID = tuple(b / 100 for b in range(0, 9))
# A transformer's memory traffic in multiples of its activation bytes (perf/memory_traffic.py).
TRANSFORMER_TRAFFIC_GRID = tuple(float(k) for k in range(0, 13))
# The share of that traffic a fused stack (tuned, compile) still moves: fused kernels read and write a layer's
# activations fewer times, not never.
FUSED_TRAFFIC_GRID = (0.25, 0.5, 0.75, 1.0)
ALS_ROUNDS = 8
SHRINK = 2.0             # rows of prior weight pulling a group/family interaction towards 0
STACKS = ("tuned", "amp", "compile")
UNKNOWN_STACK = "auto"   # nothing read from the user's code: centred between the fitted stacks
FUSED_STACKS = ("tuned", "compile")   # stacks whose elementwise work is fused: a share of the eager traffic
UNSEEN_DIE = statistics.median
STEP_OVERHEAD_S = 1.0e-3
LAYER_OVERHEAD_S = 0.1e-3


@dataclass(frozen=True)
class Device:
    key: str
    group: str
    peak_tflops: dict[str, float]
    memory_gbytes_s: float      # per rank
    ranks_per_accelerator: int

    def peak(self, precision: str, tf32: bool | None = False) -> float:
        """TFLOPS per rank a precision is measured against. fp32 on a die with TF32 tensor cores: the TF32 peak where
        TF32 is allowed (NGC containers, the bundled entrypoints, code that sets it), the fp32 peak where it is not
        (upstream PyTorch's default for matmuls), their geometric mean where it is not known (tf32_rate_span: the band)."""
        if precision != "fp32" or "tf32" not in self.peak_tflops or tf32 is False:
            return self.peak_tflops[precision]
        if tf32:
            return self.peak_tflops["tf32"]
        return math.sqrt(self.peak_tflops["tf32"] * self.peak_tflops["fp32"])


@dataclass(frozen=True)
class Fit:
    size_knee: float                      # h0
    cnn_traffic: float                    # bytes per training FLOP of a convolutional network
    sync_loss: float                      # step loss of a layout of more than one rank
    groups: dict[str, float]              # log effects
    families: dict[str, float]
    stacks: dict[str, float]
    pairs: dict[str, float]               # "group/family" interactions
    rows: int
    transformer_traffic: float = 0.0      # memory traffic per activation byte of a transformer
    fused_traffic: float = 1.0            # the share of the eager traffic a fused stack (tuned, compile) moves
    simt_exponent: float = 0.0            # gamma of fp32 math on the CUDA cores (perf/fp32_math.py)

    def traffic_weight(self, stack: str) -> float:
        """w: 1 where elementwise kernels run eagerly (amp; a stack not known), the fitted share where a stack fuses
        them."""
        return self.fused_traffic if stack in FUSED_STACKS else 1.0

    def efficiency(self, group: str, family: str | None, stack: str) -> tuple[float, str]:
        """(efficiency, the rows it rests on, in words)."""
        family = family or "language"
        g = self.groups.get(group, UNSEEN_DIE(self.groups.values()))
        m = self.families.get(family, statistics.fmean(self.families.values()))
        s = self.stacks[stack] if stack in self.stacks else self.stack_centre()
        pair = self.pairs.get(f"{group}/{family}", 0.0)
        if group not in self.groups:
            basis = f"no {group} rows: the median die's effect"
        elif f"{group}/{family}" in self.pairs:
            basis = f"{group} {family} rows"
        else:
            basis = f"{group} rows with the {family} family's effect"
        if stack not in self.stacks:
            low, high = self.stack_extremes()
            basis += (f"; stack unknown: centred between {low} and {high}" if stack == UNKNOWN_STACK else
                      f"; no {stack} rows: centred between {low} and {high}")
        return math.exp(g + m + s + pair), basis

    def stack_extremes(self) -> tuple[str, str]:
        return min(self.stacks, key=self.stacks.__getitem__), max(self.stacks, key=self.stacks.__getitem__)

    def stack_centre(self) -> float:
        low, high = self.stack_extremes()
        return (self.stacks[low] + self.stacks[high]) / 2.0

    def traffic(self, shape: perf.ModelShape, device: Device) -> float:
        """c x T / B: one sample's fitted memory-traffic seconds where the elementwise kernels run eagerly."""
        cnn_s, transformer_s = traffic_seconds(shape, device)
        return self.cnn_traffic * cnn_s + self.transformer_traffic * transformer_s

    def stack_span(self, stack: str) -> tuple[float, float]:
        """(least, most) efficiency of the fitted stacks relative to the one this stack is predicted with: (1, 1)
        for a known stack; for an unknown one the factors that reach the least and the most efficient stack."""
        if stack in self.stacks:
            return 1.0, 1.0
        centre = self.stack_centre()
        return math.exp(min(self.stacks.values()) - centre), math.exp(max(self.stacks.values()) - centre)

    def to_json(self) -> dict:
        return {"size_knee": self.size_knee,
                "cnn_traffic": self.cnn_traffic, "transformer_traffic": self.transformer_traffic,
                "fused_traffic": self.fused_traffic, "simt_exponent": self.simt_exponent,
                "sync_loss": self.sync_loss,
                "groups": self.groups, "families": self.families, "stacks": self.stacks, "pairs": self.pairs,
                "rows": self.rows}

    @classmethod
    def from_json(cls, data: dict) -> Fit:
        return cls(**data)


@dataclass(frozen=True)
class Point:
    """One calibration row, reduced to one rank's compute seconds per sample."""

    row: CalibrationRow
    shape: perf.ModelShape
    device: Device
    fabric: Fabric
    seconds_per_sample: float     # compute, as the row's layout ran it (sync loss and overhead included)

    @property
    def multi_rank(self) -> bool:
        return self.row.nodes * self.row.ranks_per_node > 1


# ----------------------------------------------------------------------------- terms
def knee(shape: perf.ModelShape, size_knee: float) -> float:
    if shape.family == "cnn":
        return 1.0
    # with tensor parallelism each rank multiplies its 1/t share of every layer: its GEMMs are that narrow
    # (ASSUMED: the knee sees width / t; docs/cost-model.md)
    h = width(shape) / shape.tensor_parallel
    return h / (h + size_knee)


def traffic_seconds(shape: perf.ModelShape, device: Device, eager: float = 0.0) -> tuple[float, float]:
    """(CNN, transformer) memory-traffic seconds of one sample at unit coefficients (perf/memory_traffic.py)."""
    return (cnn_traffic_seconds(shape, device.memory_gbytes_s),
            transformer_traffic_seconds(shape, device.memory_gbytes_s, eager))


def step_overhead_seconds(shape: perf.ModelShape) -> float:
    return STEP_OVERHEAD_S + LAYER_OVERHEAD_S * layers(shape)


def stack_rate_span(shape: perf.ModelShape, device: Device, fit: Fit) -> tuple[float, float]:
    """(least, most) compute rate of the fitted stacks relative to the one this shape is predicted with: (1, 1) for
    a known stack; for one not known, what each fitted stack would give this model on this device, its efficiency
    and its memory traffic both (a fused stack pays only its share of the eager traffic), so that the plan's band
    holds them all."""
    if shape.stack in fit.stacks:
        return 1.0, 1.0

    def seconds(stack: str) -> float:
        eff = fit.efficiency(device.group, shape.family, stack)[0]
        return compute_seconds(shape, device, eff, fit) + fit.traffic_weight(stack) * fit.traffic(shape, device)
    centre = seconds(shape.stack)
    ends = [centre / seconds(stack) for stack in fit.stacks]
    return min(ends), max(ends)


def _path_rates(shape: perf.ModelShape, device: Device, efficiency: float, fit: Fit) -> list[float]:
    """TFLOPS of each way the math may run (fp32_math.paths): P x e x knee(h), SIMT fp32 with its fitted gain,
    each capped at its peak."""
    e = efficiency * knee(shape, fit.size_knee)
    return [fp32_math.path_rate(peak, gain, e) for peak, gain in
            fp32_math.paths(device.peak_tflops, shape.precision, allows_tf32(shape), fit.simt_exponent)]


def compute_seconds(shape: perf.ModelShape, device: Device, efficiency: float, fit: Fit) -> float:
    """F over the path's rate; where fp32's TF32 is not known, the geometric mean of the TF32 and the SIMT rates."""
    return shape.training_flops_per_sample / (fp32_math.rate(_path_rates(shape, device, efficiency, fit)) * 1e12)


def tf32_rate_span(shape: perf.ModelShape, device: Device, fit: Fit) -> tuple[float, float]:
    """(low, high) factor of the compute rate between fp32 without and with TF32, where TF32 is not known; (1, 1)
    elsewhere."""
    rates = _path_rates(shape, device, fit.efficiency(device.group, shape.family, shape.stack)[0], fit)
    centre = fp32_math.rate(rates)
    return min(rates) / centre, max(rates) / centre


def allows_tf32(shape: perf.ModelShape) -> bool | None:
    """fp32 with TF32: what the spec or the code says; where neither says, a CNN's convolutions do (PyTorch's
    torch.backends.cudnn.allow_tf32 defaults to True, 'CUDA semantics: TF32 on Ampere devices'), a transformer's
    matmuls are not known (torch.backends.cuda.matmul.allow_tf32 defaults to False since PyTorch 1.12; NGC
    containers turn it on)."""
    if shape.tf32 is None and shape.family == "cnn":
        return True
    return shape.tf32


def device_for(catalog: Catalog, calibration: Calibration, key: str) -> Device:
    """A device by key: a catalog accelerator (peak from the catalog) or a calibration-only one (RTX 3090)."""
    spec = calibration.device(key)
    acc = catalog.accelerators.get(key)
    peak = (spec.peak_tflops if spec and spec.peak_tflops else None) or (acc.peak_tflops if acc else None)
    if peak is None:
        raise KeyError(f"no peak TFLOPS for device {key!r} in the catalog or calibration.json")
    per_acc = spec.ranks_per_accelerator if spec else 1
    group = spec.group if spec else key
    bandwidth = (spec.memory_gbytes_s if spec else 0.0) / per_acc
    peak = dict(peak) | ({"tf32": spec.tf32_tflops} if spec and spec.tf32_tflops else {})
    return Device(key, group, {p: v / per_acc for p, v in peak.items()}, bandwidth, per_acc)


def seconds_per_sample(shape: perf.ModelShape, device: Device, efficiency: float, fit: Fit, micro_batch: int,
                       multi_rank: bool) -> float:
    """One rank's seconds per sample: compute and memory traffic, slowed by the synchronous step's loss on more
    than one rank, plus the fixed per-step overhead spread over the micro-batch."""
    compute = compute_seconds(shape, device, efficiency, fit)
    compute += fit.traffic_weight(shape.stack) * fit.traffic(shape, device)
    return compute * (1.0 + (fit.sync_loss if multi_rank else 0.0)) + step_overhead_seconds(shape) / max(1, micro_batch)
