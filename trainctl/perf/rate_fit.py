"""The fit of the compute-rate model (perf/compute_rate.py) to the calibration's published rows.

Pure. A grid over (h0, c_cnn, c_transformer, phi); for each, the effects by alternating least squares on the log of
what each row implies; the grid point with the least squared log error wins. A multi-rank row is first reduced to
one rank's compute time by inverting the network model (perf.invert_compute_rate) for the cluster it was measured
on. gamma (fp32 math on the CUDA cores, perf/fp32_math.py) comes from the TF32 on/off pairs, never from a row.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable

from trainctl import perf
from trainctl.catalog import Calibration, CalibrationRow, Catalog, ModelDims
from trainctl.perf import fp32_math
from trainctl.perf.compute_rate import (ALS_ROUNDS, CNN_TRAFFIC_GRID, FUSED_STACKS, FUSED_TRAFFIC_GRID, SHRINK,
                                        SIZE_KNEE_GRID, TRANSFORMER_TRAFFIC_GRID, Fit, Point, allows_tf32,
                                        device_for, seconds_per_sample, step_overhead_seconds, traffic_seconds)
from trainctl.perf.memory_traffic import width
from trainctl.perf.network import Fabric, cluster_fabric


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


def pair_points(catalog: Catalog, calibration: Calibration) -> tuple[tuple[Point, Point], ...]:
    """The calibration's TF32 pairs as (TF32 off, TF32 on) points: they fit gamma (fp32_math), never an efficiency."""
    return tuple(tuple(points(catalog, calibration, pair)) for pair in calibration.tf32_pairs)  # type: ignore[misc]


def fit(pts: tuple[Point, ...] | list[Point], pairs: tuple[tuple[Point, Point], ...] = ()) -> Fit:
    """The efficiencies and the other numbers from the rows whose math ran on tensor cores (below); then gamma from
    the TF32 pairs under that fit. A row of fp32 on the CUDA cores (a V100's fp32) says how fast those ran, not how
    efficient the die's tensor cores are: fitted as an efficiency with gamma's gain it pulled the whole fit (the
    size knee from 300 to 500, the transformer traffic from 6 to 2) towards five rows; it is predicted, and scored,
    like any other."""
    tensor = [p for p in pts if not fp32_math.on_cuda_cores(p.device.peak_tflops, p.shape.precision,
                                                            allows_tf32(p.shape))]
    found = dataclasses.replace(_fit(tensor or pts, sync_loss(pts)), rows=len(pts))
    gamma = fp32_math.fit_gamma([(off.seconds_per_sample / on.seconds_per_sample, pair_ratio(found, off, on))
                                 for off, on in pairs])
    return dataclasses.replace(found, simt_exponent=gamma)


def pair_ratio(f: Fit, off: Point, on: Point) -> Callable[[float], float]:
    """gamma -> the predicted seconds per sample of the TF32-off run over the TF32-on run."""
    eff = f.efficiency(on.device.group, on.shape.family, on.row.stack)[0]

    def predict(gamma: float) -> float:
        g = dataclasses.replace(f, simt_exponent=gamma)
        return (seconds_per_sample(off.shape, off.device, eff, g, off.row.micro_batch, False)
                / seconds_per_sample(on.shape, on.device, eff, g, on.row.micro_batch, False))
    return predict


def _fit(pts: tuple[Point, ...] | list[Point], sync: float) -> Fit:
    """Coordinate search: h0 on a grid with no memory traffic, then the CNN traffic, then the transformer traffic,
    then the fused stacks' share of it, the transformer traffic again, then h0 again."""
    if not pts:
        raise ValueError("no calibration rows to fit")
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
            f = fit(points(catalog, calibration), pair_points(catalog, calibration))
        _FITS[key] = (catalog, calibration, f)
    return _FITS[key][2]
