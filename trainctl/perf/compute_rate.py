"""The compute rate of one rank, calibrated on published training measurements.

Pure: the table is trainctl/catalog/calibration.json (every row names its source); this module fits three
kinds of numbers to it and predicts any (model, device, precision):

    seconds per sample = F / (P x e[group] x h / (h + h0))  +  [eager attention] k x A / B

- F: training FLOPs per sample (3 x forward, 4 x with activation checkpointing); P: the device's dense peak
  for the precision; h: the transformer's width. Small matrices keep tensor cores idle: h / (h + h0) is the
  share of the peak that GEMMs of width h reach (a roofline knee, fitted: `size_knee`).
- e[group]: the efficiency of one die's software stack at large widths (GA102 = RTX 3090 and A10G, GA100,
  GH100, Trainium1), fitted per model family (vision, language) where the group has rows of that family,
  else over all its rows; a group with no published row takes the geometric mean of the others.
- A: bytes of attention scores per sample (5 x heads x tokens^2 x layers, Korthikanti et al. 2022) over the
  memory bandwidth B, times a fitted k: only where attention materialises its scores (eager PyTorch).
  trainctl's bundled entrypoints run PyTorch 2's fused attention (and Neuron compiles it), so plans use
  the fused form and this term only explains the older eager measurements.

The fit is a grid over (h0, k) with e[group] in closed form (the geometric mean of what each row implies),
minimising the squared log error. A multi-node row is first reduced to one rank's compute time by inverting
the network model (perf.invert_compute_rate) for the cluster it was measured on.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from trainctl import perf
from trainctl.catalog import Calibration, CalibrationRow, Catalog, ModelDims
from trainctl.perf.network import Fabric, cluster_fabric

SIZE_KNEE_GRID = tuple(range(0, 2001, 100))
ATTENTION_FACTOR_GRID = tuple(float(k) for k in range(0, 17, 2))
# Width assumed for a custom model given only params and FLOPs: a transformer has ~12 x layers x h^2
# parameters, and published LMs keep about 100 of width per layer (LLaMA-7B 4096/32, GPT-3 12288/96):
# params ~ 0.12 h^3. ASSUMED; the plan says so.
PARAMS_PER_WIDTH_CUBED = 0.12


@dataclass(frozen=True)
class Device:
    key: str
    group: str
    peak_tflops: dict[str, float]
    memory_gbytes_s: float      # per rank
    ranks_per_accelerator: int


@dataclass(frozen=True)
class Fit:
    size_knee: float                      # h0
    attention_factor: float               # k
    efficiency: dict[str, float]          # e per device group, all model families together
    family_efficiency: dict[str, float]   # e per "group/family" (vision, language) where rows exist
    fallback_efficiency: float            # for a group without rows
    rows: int

    def group_efficiency(self, group: str, family: str | None = None) -> tuple[float, str]:
        """(efficiency, basis): 'group/family' rows, else the group's rows of any family, else 'none'."""
        key = f"{group}/{family}"
        if key in self.family_efficiency:
            return self.family_efficiency[key], key
        if group in self.efficiency:
            return self.efficiency[group], group
        return self.fallback_efficiency, "none"


@dataclass(frozen=True)
class Point:
    """One calibration row, reduced to one rank's compute seconds per sample."""

    row: CalibrationRow
    shape: perf.ModelShape
    device: Device
    fabric: Fabric
    seconds_per_sample: float


# ----------------------------------------------------------------------------- terms
def width(shape: perf.ModelShape) -> float:
    if shape.hidden:
        return float(shape.hidden)
    return (shape.params / PARAMS_PER_WIDTH_CUBED) ** (1.0 / 3.0)


def attention_score_bytes(shape: perf.ModelShape) -> float:
    if not (shape.heads and shape.tokens and shape.layers):
        return 0.0
    scale = 2.0 if shape.precision == "fp32" else 1.0
    return scale * 5.0 * shape.heads * shape.tokens ** 2 * shape.layers


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
    return Device(key, group, {p: v / per_acc for p, v in peak.items()}, bandwidth, per_acc)


def seconds_per_sample(shape: perf.ModelShape, device: Device, efficiency: float, size_knee: float,
                       attention_factor: float, eager: bool) -> float:
    h = width(shape)
    compute = shape.training_flops_per_sample / (device.peak_tflops[shape.precision] * 1e12 * efficiency
                                                 * h / (h + size_knee))
    memory = 0.0
    if eager and device.memory_gbytes_s > 0:
        memory = attention_factor * attention_score_bytes(shape) / (device.memory_gbytes_s * 1e9)
    return compute + memory


# ----------------------------------------------------------------------------- points and the fit
def row_shape(dims: ModelDims, row: CalibrationRow) -> perf.ModelShape:
    factor = 4.0 if row.checkpointing else 3.0
    return perf.ModelShape(params=dims.params, training_flops_per_sample=factor * dims.forward_flops,
                           precision=row.precision, optimizer="adam", activation_bytes_per_sample=None,
                           hidden=dims.hidden, tokens=dims.tokens, layers=dims.layers, heads=dims.heads,
                           family=dims.family)


def row_fabric(row: CalibrationRow) -> Fabric:
    return cluster_fabric(row.ranks_per_node, row.intra_gbytes_s or 1.0, row.inter_gbps or None, row.transport)


def points(catalog: Catalog, calibration: Calibration) -> tuple[Point, ...]:
    out = []
    for row in calibration.rows:
        shape = row_shape(calibration.shapes[row.model], row)
        fab = row_fabric(row)
        rate = perf.invert_compute_rate(shape, fab, row.nodes, row.micro_batch, row.samples_per_s, row.strategy,
                                        row.accumulation)
        out.append(Point(row, shape, device_for(catalog, calibration, row.device), fab, 1.0 / rate))
    return tuple(out)


def fit(pts: tuple[Point, ...] | list[Point]) -> Fit:
    if not pts:
        raise ValueError("no calibration rows to fit")
    # Per row, the parts of seconds_per_sample that do not depend on the fitted numbers (a plan fits once,
    # the evaluation once per left-out row: keep the grid's inner loop to a few multiplications).
    terms = []
    for p in pts:
        ideal = seconds_per_sample(p.shape, p.device, 1.0, 0.0, 0.0, False)   # at e = 1, no size penalty
        memory = seconds_per_sample(p.shape, p.device, 1.0, 0.0, 1.0, p.row.attention == "eager") - ideal
        terms.append((ideal, width(p.shape), memory, p.seconds_per_sample, p.device.group,
                      f"{p.device.group}/{p.shape.family}"))
    best: tuple[float, Fit] | None = None
    for knee in SIZE_KNEE_GRID:
        for k in ATTENTION_FACTOR_GRID:
            candidate = _fit_efficiencies(terms, knee, k, len(pts))
            if candidate is None:
                continue
            err = 0.0
            for ideal, h, memory, seconds, group, pair in terms:
                e = candidate.family_efficiency[pair]
                err += math.log((ideal * (h + knee) / h / e + k * memory) / seconds) ** 2
            if best is None or err < best[0] - 1e-12:
                best = (err, candidate)
    assert best is not None, "k = 0 is always a candidate"
    return best[1]


def _fit_efficiencies(terms, knee: float, k: float, n: int) -> Fit | None:
    logs: dict[str, list[float]] = {}
    family_logs: dict[str, list[float]] = {}
    for ideal, h, memory, seconds, group, pair in terms:
        left = seconds - k * memory
        if left <= 0:
            return None          # this k claims more time than the row took: not a candidate
        implied = math.log(ideal * (h + knee) / h / left)
        logs.setdefault(group, []).append(implied)
        family_logs.setdefault(pair, []).append(implied)
    eff = {g: math.exp(sum(v) / len(v)) for g, v in logs.items()}
    by_family = {g: math.exp(sum(v) / len(v)) for g, v in family_logs.items()}
    fallback = math.exp(sum(math.log(e) for e in eff.values()) / len(eff))
    return Fit(float(knee), k, eff, by_family, fallback, n)


def predict_seconds(p: Point, f: Fit) -> float:
    eff, _ = f.group_efficiency(p.device.group, p.shape.family)
    return seconds_per_sample(p.shape, p.device, eff, f.size_knee, f.attention_factor, p.row.attention == "eager")


def predict_layout(p: Point, f: Fit) -> float:
    """Samples/s of the row's whole layout, from the fitted compute rate and the row's network."""
    rate = 1.0 / predict_seconds(p, f)
    r = p.row
    return perf.layout_throughput(p.shape, p.fabric, r.nodes, r.micro_batch, rate, r.strategy,
                                  r.accumulation).samples_per_s


_FITS: dict[tuple[int, int], tuple[Catalog, Calibration, Fit]] = {}


def calibrated(catalog: Catalog, calibration: Calibration) -> Fit:
    """The fit over every row, once per (catalog, calibration) pair: both are loaded once and never change.
    (Keyed by identity; the pair is kept in the value so that the ids cannot be reused while cached.)"""
    key = (id(catalog), id(calibration))
    if key not in _FITS:
        _FITS[key] = (catalog, calibration, fit(points(catalog, calibration)))
    return _FITS[key][2]
