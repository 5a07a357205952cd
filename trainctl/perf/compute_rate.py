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

The fit: a grid over (h0, c_cnn, c_transformer); for each, the effects by alternating least squares on the log of what each row
implies; the grid point with the least squared log error wins. A multi-rank row is first reduced to one rank's
compute time by inverting the network model (perf.invert_compute_rate) for the cluster it was measured on.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from trainctl import perf
from trainctl.catalog import Calibration, CalibrationRow, Catalog, ModelDims
from trainctl.perf.memory_traffic import cnn_traffic_seconds, layers, transformer_traffic_seconds, width
from trainctl.perf.network import Fabric, cluster_fabric

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
        (upstream PyTorch's default for matmuls), their geometric mean where it is not known (tf32_span: the band)."""
        if precision != "fp32" or "tf32" not in self.peak_tflops or tf32 is False:
            return self.peak_tflops[precision]
        if tf32:
            return self.peak_tflops["tf32"]
        return math.sqrt(self.peak_tflops["tf32"] * self.peak_tflops["fp32"])

    def tf32_span(self, precision: str, tf32: bool | None) -> tuple[float, float]:
        """(low, high) factor of the rate between the fp32 and the TF32 peak, where TF32 is not known."""
        if precision != "fp32" or "tf32" not in self.peak_tflops or tf32 is not None:
            return 1.0, 1.0
        ratio = math.sqrt(self.peak_tflops["tf32"] / self.peak_tflops["fp32"])
        return 1.0 / ratio, ratio


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
                "fused_traffic": self.fused_traffic,
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
        return (shape.training_flops_per_sample / (device.peak(shape.precision, allows_tf32(shape)) * 1e12 * eff
                                                   * knee(shape, fit.size_knee))
                + fit.traffic_weight(stack) * fit.traffic(shape, device))
    centre = seconds(shape.stack)
    ends = [centre / seconds(stack) for stack in fit.stacks]
    return min(ends), max(ends)


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
    compute = shape.training_flops_per_sample / (device.peak(shape.precision, allows_tf32(shape)) * 1e12 * efficiency
                                                 * knee(shape, fit.size_knee))
    compute += fit.traffic_weight(shape.stack) * fit.traffic(shape, device)
    return compute * (1.0 + (fit.sync_loss if multi_rank else 0.0)) + step_overhead_seconds(shape) / max(1, micro_batch)


# ----------------------------------------------------------------------------- points and the fit
def row_shape(dims: ModelDims, row: CalibrationRow) -> perf.ModelShape:
    factor = 4.0 if row.checkpointing else 3.0
    return perf.ModelShape(params=dims.params, training_flops_per_sample=factor * dims.forward_flops,
                           precision=row.precision, optimizer="adam", activation_bytes_per_sample=None,
                           hidden=dims.hidden, tokens=dims.tokens, layers=dims.layers, heads=dims.heads,
                           family=dims.family, tf32=row.tf32, tensor_parallel=row.tensor_parallel)


def row_fabric(row: CalibrationRow) -> Fabric:
    return cluster_fabric(row.ranks_per_node, row.intra_gbytes_s or 1.0, row.inter_gbps or None, row.transport)


def points(catalog: Catalog, calibration: Calibration,
           rows: tuple[CalibrationRow, ...] | None = None) -> tuple[Point, ...]:
    """The calibration's rows (or `rows` of it, e.g. its check rows) reduced to one rank's compute seconds."""
    out = []
    for row in calibration.rows if rows is None else rows:
        shape = row_shape(calibration.shapes[row.model], row)
        fab = row_fabric(row)
        rate = perf.invert_compute_rate(shape, fab, row.nodes, row.micro_batch, row.samples_per_s, row.strategy,
                                        row.accumulation)
        out.append(Point(row, shape, device_for(catalog, calibration, row.device), fab, 1.0 / rate))
    return tuple(out)


def sync_loss(pts: tuple[Point, ...] | list[Point]) -> float:
    """Median over published (1 rank, n ranks) pairs of the same series of 1-rank rate / n-rank compute rate - 1."""
    by_id = {p.row.id: p for p in pts}
    ratios = [p.seconds_per_sample / by_id[p.row.scaling_base].seconds_per_sample
              for p in pts if p.row.scaling_base in by_id and not by_id[p.row.scaling_base].multi_rank]
    return max(0.0, statistics.median(ratios) - 1.0) if ratios else 0.0


def fit(pts: tuple[Point, ...] | list[Point]) -> Fit:
    """Coordinate search: h0 on a grid with no memory traffic, then the CNN traffic, then the transformer traffic,
    then the fused stacks' share of it, the transformer traffic again, then h0 again."""
    if not pts:
        raise ValueError("no calibration rows to fit")
    sync = sync_loss(pts)
    terms = []
    for p in pts:
        # what does not depend on the fitted numbers: ideal compute at e = 1 without the knee, the traffic terms,
        # the compute seconds the row leaves once its sync loss and step overhead are taken out
        ideal = p.shape.training_flops_per_sample / (p.device.peak(p.shape.precision, allows_tf32(p.shape)) * 1e12)
        left = (p.seconds_per_sample - step_overhead_seconds(p.shape) / p.row.micro_batch) / \
            (1.0 + (sync if p.multi_rank else 0.0))
        terms.append((ideal, 1.0 if p.shape.family == "cnn" else width(p.shape), p.shape.family == "cnn",
                      traffic_seconds(p.shape, p.device, float(p.row.attention == "eager")), left,
                      (p.device.group, p.shape.family or "language", p.row.stack)))
    best = _best(terms, SIZE_KNEE_GRID, (0.0,), (0.0,), (1.0,), sync)[1]
    best = _best(terms, (best.size_knee,), CNN_TRAFFIC_GRID, (0.0,), (1.0,), sync)[1]
    best = _best(terms, (best.size_knee,), (best.cnn_traffic,), TRANSFORMER_TRAFFIC_GRID, (1.0,), sync)[1]
    best = _best(terms, (best.size_knee,), (best.cnn_traffic,), (best.transformer_traffic,), FUSED_TRAFFIC_GRID,
                 sync)[1]
    best = _best(terms, (best.size_knee,), CNN_TRAFFIC_GRID, TRANSFORMER_TRAFFIC_GRID, (best.fused_traffic,),
                 sync)[1]
    return _best(terms, SIZE_KNEE_GRID, (best.cnn_traffic,), (best.transformer_traffic,), (best.fused_traffic,),
                 sync)[1]


def _best(terms, knees, traffics, tr_traffics, fused, sync: float) -> tuple[float, Fit]:
    best: tuple[float, Fit] | None = None
    for h0 in knees:
        for beta in traffics:
            for k in tr_traffics:
                for phi in fused:
                    found = _fit_effects(terms, float(h0), (beta, k), phi, sync)
                    if found is not None and (best is None or found[0] < best[0] - 1e-12):
                        best = found
    assert best is not None, "no traffic is always a candidate"
    return best


def _fit_effects(terms, h0: float, coef: tuple[float, float], phi: float, sync: float) -> tuple[float, Fit] | None:
    ys, keys = [], []
    weight = {s: phi if s in FUSED_STACKS else 1.0 for s in {t[5][2] for t in terms}}
    for ideal, h, cnn, traffic, left, key in terms:
        compute = left - weight[key[2]] * (coef[0] * traffic[0] + coef[1] * traffic[1])
        if compute <= 0:
            return None          # these factors claim more time than the row took: not a candidate
        ys.append(math.log(ideal * (1.0 if cnn else (h + h0) / h) / compute))
        keys.append(key)
    effects = _alternating_least_squares(ys, keys)
    groups, families, stacks = effects
    resid: dict[str, list[float]] = {}
    for y, (g, f, s) in zip(ys, keys):
        resid.setdefault(f"{g}/{f}", []).append(y - groups[g] - families[f] - stacks[s])
    pairs = {pair: sum(v) / (len(v) + SHRINK) for pair, v in resid.items()}
    err = 0.0
    for (ideal, h, cnn, traffic, left, (g, f, s)) in terms:
        e = math.exp(groups[g] + families[f] + stacks[s] + pairs[f"{g}/{f}"])
        err += math.log((ideal * (1.0 if cnn else (h + h0) / h) / e
                         + weight[s] * (coef[0] * traffic[0] + coef[1] * traffic[1])) / left) ** 2
    return err, Fit(h0, coef[0], sync, groups, families, stacks, pairs, len(terms), coef[1], phi)


def _alternating_least_squares(ys: list[float], keys: list[tuple[str, str, str]]):
    """Main effects of group, family and stack on the log efficiency (each the mean of what its rows leave)."""
    effects = tuple({key[i]: 0.0 for key in keys} for i in range(3))
    for _ in range(ALS_ROUNDS):
        for pos, table in enumerate(effects):
            sums: dict[str, float] = dict.fromkeys(table, 0.0)
            counts: dict[str, int] = dict.fromkeys(table, 0)
            for y, key in zip(ys, keys):
                rest = effects[0][key[0]] + effects[1][key[1]] + effects[2][key[2]] - table[key[pos]]
                sums[key[pos]] += y - rest
                counts[key[pos]] += 1
            for name in table:
                table[name] = sums[name] / counts[name]
    return effects


def predict_seconds(p: Point, f: Fit) -> float:
    """In-sample, with the row's own stack label (the fit's side: a plan never has the label; scripts/eval_model.py
    scores the plan's own predictor, perf/estimator.py modelled_rate)."""
    eff, _ = f.efficiency(p.device.group, p.shape.family, p.row.stack)
    return seconds_per_sample(p.shape, p.device, eff, f, p.row.micro_batch, p.multi_rank)


def predict_layout(p: Point, f: Fit) -> float:
    """Samples/s of the row's whole layout, from the fitted compute rate and the row's network."""
    rate = 1.0 / predict_seconds(p, f)
    r = p.row
    return perf.layout_throughput(p.shape, p.fabric, r.nodes, r.micro_batch, rate, r.strategy,
                                  r.accumulation).samples_per_s


_FITS: dict[tuple[int, int], tuple[Catalog, Calibration, Fit]] = {}


def calibrated(catalog: Catalog, calibration: Calibration, stored: dict | None = None) -> Fit:
    """The fit over every row: the one scripts/eval_model.py stored (calibration_fit.json) when it was made from
    this calibration table, else fitted here once per (catalog, calibration) pair."""
    key = (id(catalog), id(calibration))
    if key not in _FITS:
        if stored and stored.get("calibration_date") == calibration.date and \
                stored.get("fit", {}).get("rows") == len(calibration.rows):
            f = Fit.from_json(stored["fit"])
        else:
            f = fit(points(catalog, calibration))
        _FITS[key] = (catalog, calibration, f)
    return _FITS[key][2]
