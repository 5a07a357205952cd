"""How good is the throughput a user's plan states, on published sources it never saw? Leave each out and predict it.

    python scripts/eval_model.py            # writes docs/model-accuracy.md and trainctl/catalog/calibration_fit.json
    python scripts/eval_model.py --check    # exit 1 if either file is not what this run would write

One predictor: every published row is turned into the spec a user would write for it (`row_spec`: the model's
size, shape, precision and activation checkpointing, the per-GPU batch; a script of the user's own, so `stack:
auto`), and predicted by the plan's own functions: `usecases.plan.read_code` reads the script's code as a plan reads
a user's entrypoint.source_dir (here the verbatim excerpts of the script that produced the row, calibration.json
`code_evidence`, written to a temporary folder), `planner.ranking.model_shape` makes the spec's shape with what it
found, and `perf.estimator.modelled_rate` gives the rate of one rank, through the network model of the row's cluster
(tests/project/test_eval_is_the_plan.py pins that the plan gives the same number). Nothing a spec or its code cannot
say reaches the prediction; the rows' stack labels are only the fit's (the rows it learns from).

Leave-one-source-out: the rows of one source group (calibration.json `source_groups`: resembling sources are one
group) are predicted by a model fitted on every other group. Then each device group is left out whole: the error
on hardware without published rows. Four ways a spec can describe a row are scored: `code` (the headline: the
shape, stack auto, the script's code read), `auto` (the same spec whose code is not read: centred between the
stacks), `stack` (the same spec carrying model.stack, the row's label: the former per-source-label figure, for
comparison) and `size` (a transformer given by params and flops_per_sample alone, code not read).

Check rows (calibration.json `check_rows`): published rows of models the fit cannot represent yet, predicted the same
way (a user's spec, the fit without their source group) and reported beside the headline, never fitted.

Bands: from the same out-of-source predictions, one per (way, device seen or not); coverage is measured as the
plan states it, each row's band built without its own source group (trainctl/catalog/calibration_fit.json).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainctl import perf  # noqa: E402
from trainctl.catalog import RESIDUALS_PATH, load_calibration, load_catalog  # noqa: E402
from trainctl.perf import compute_rate, estimator, rate_fit  # noqa: E402
from trainctl.planner.memory_admission import memory_fits  # noqa: E402
from trainctl.planner.ranking import model_shape  # noqa: E402
from trainctl.planner.spot.hazard import load_hazard_table  # noqa: E402
from trainctl.perf.stack_inference import StackInference  # noqa: E402
from trainctl.spec import JobSpec  # noqa: E402
from trainctl.usecases.plan import read_code  # noqa: E402

REPORT_PATH = ROOT / "docs" / "model-accuracy.md"
TARGET_MEDIAN = 0.20
TARGET_BIAS = 0.10
TARGET_WORST_RATIO = 2.0
TARGET_COVERAGE = 0.85
BAND_PERCENTILES = (1.0, 99.0)
WAYS = ("code", "auto", "stack", "size")
HEADLINE = "code"


# ----------------------------------------------------------------------------- the spec a user would write
def row_doc(row, dims, way: str = "auto", script: str = "train.py") -> dict:
    """The spec of a published row as a user writes it for a script of their own: `auto` and `code` give the shape
    (transformers) or the size (CNNs, which have no shape fields), `size` the params and FLOPs alone, `stack` the
    shape and model.stack set to the row's stack. `script`: the entrypoint under source_dir (the one whose code is
    read for `code`)."""
    model = {"params": dims.params, "flops_per_sample": (4.0 if row.checkpointing else 3.0) * dims.forward_flops,
             "family": dims.family, "precision": row.precision, "activation_checkpointing": row.checkpointing,
             "strategy": "fsdp" if row.strategy != "ddp" else "ddp"}
    if way != "size" and dims.family != "cnn" and dims.hidden:
        model |= {"layers": dims.layers, "hidden": dims.hidden, "heads": dims.heads, "seq_len": dims.tokens}
        if row.tensor_parallel > 1:     # a spec given by size alone cannot say it (spec/model.py)
            model["tensor_parallel"] = row.tensor_parallel
    if way == "stack":
        model["stack"] = row.stack
    return {"name": "published-row", "entrypoint": {"script": script, "source_dir": "."}, "model": model,
            "workload": {"samples": 10_000_000, "batch_size_per_accelerator": row.micro_batch}}


def row_spec(row, dims, way: str = "auto", script: str = "train.py") -> JobSpec:
    return JobSpec.model_validate(row_doc(row, dims, way, script))


def write_code(folder: Path, files: dict[str, str]) -> str:
    """The row's script excerpts written as a user's source_dir; the entrypoint script (the first file named)."""
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    return next(iter(files), "train.py")


@lru_cache(maxsize=None)
def row_code(row, dims) -> tuple[JobSpec, StackInference | None]:
    """The `code` spec of a row and what the plan reads from its code: the script's excerpts written to a folder, the
    spec beside it, `usecases.plan.read_code` on it (the plan's reading of entrypoint.source_dir)."""
    with tempfile.TemporaryDirectory(prefix="eval-code-") as folder:
        script = write_code(Path(folder), load_calibration().code_files(row))
        spec = row_spec(row, dims, "code", script)
        return spec, read_code(spec, str(Path(folder) / "job.yaml"))


def spec_of(row, dims, way: str) -> tuple[JobSpec, StackInference | None]:
    return row_code(row, dims) if way == "code" else (row_spec(row, dims, way), None)


def predict(spec: JobSpec, row, fab, catalog, calibration, fit, residuals,
            code: StackInference | None = None) -> tuple[float, estimator.ModelledRate, perf.ModelShape]:
    """Whole-layout samples/s of the row's cluster for this spec: the plan's shape (with what the plan read from the
    spec's code), the plan's rate of one rank."""
    shape = model_shape(spec, code)
    unit = "NeuronCore" if row.device == "Trainium1" else "GPU"
    ranks = row.nodes * row.ranks_per_node
    modelled = estimator.modelled_rate(shape, row.device, ranks, spec.workload.batch_size_per_accelerator, unit,
                                       catalog, calibration, fit, residuals)
    tp = perf.layout_throughput(shape, fab, row.nodes, row.micro_batch, modelled.rate, row.strategy, row.accumulation)
    return tp.samples_per_s, modelled, shape


def refusal(spec: JobSpec, shape: perf.ModelShape, row, calibration) -> str:
    """Why the plan would refuse this spec on the row's cluster for memory ('' where it fits): the plan's own check
    (planner.memory_admission, as planner/ranking.py calls it), on the card the row ran on. A refused row gets no
    rate from a plan, so it is counted as refused, not scored at a rate the plan never states."""
    device = calibration.devices[row.device]
    memory = (row.memory_gib or device.memory_gib) / device.ranks_per_accelerator
    fits, fit = memory_fits(spec, shape, memory, row.nodes, row.ranks_per_node)
    if fits:
        return ""
    need = fit.state_gib + (fit.activation_gib or 0.0) + fit.working_gib
    return f"out of memory: {need:.1f} GiB per rank ({fit.strategy}) > {fit.usable_gib:.1f} GiB usable"


@dataclasses.dataclass(frozen=True)
class Result:
    point: compute_rate.Point
    way: str
    predicted: float
    held_out: str          # the source group (or device group) left out
    seen: bool             # rows of this device and family were in the fit that predicted it
    source_group: str      # the row's own source group
    kind: str              # the band the plan takes for this spec (estimator.band_kind)
    span: tuple[float, float]   # the stack (and TF32) span the plan widens the band by
    read: str = "-"        # `code`: the stack the plan read from the script's code
    refused: str = ""      # why the plan refuses this spec for memory on the row's cluster ('' where it fits)
    warned: bool = False   # the plan warns that it cannot tell this model's architecture (cnn_by_size_words)

    @property
    def published(self) -> float:
        return self.point.row.samples_per_s

    @property
    def ratio(self) -> float:
        return self.published / self.predicted

    @property
    def error(self) -> float:
        return self.predicted / self.published - 1.0


def ways_of(p: compute_rate.Point) -> tuple[str, ...]:
    return WAYS if p.shape.family != "cnn" else tuple(w for w in WAYS if w != "size")


def _predict_fold(train, test, catalog, cal, held: str, by_device: bool, pairs=()) -> list[Result]:
    """`test` predicted by the fit of `train` (and of `pairs`, the TF32 pairs of the same fold)."""
    f = rate_fit.fit(train, pairs)
    fold = dataclasses.replace(cal, rows=tuple(p.row for p in train))
    out = []
    for p in test:
        for way in ways_of(p):
            spec, code = spec_of(p.row, cal.shapes[p.row.model], way)
            samples, modelled, shape = predict(spec, p.row, p.fabric, catalog, fold, f, {}, code)
            seen = not by_device and any(q.row.device == p.row.device and q.shape.family == p.shape.family
                                         for q in train)
            out.append(Result(p, way, samples, held, seen, cal.source_group(p.row.source),
                              estimator.band_kind(shape, f),
                              estimator.band_span(shape, compute_rate.device_for(catalog, fold, p.row.device), f),
                              code.stack if code else "-", refusal(spec, shape, p.row, fold),
                              estimator.cnn_by_size_words(shape, {}) is not None))
    return out


def _pairs_without(pairs, cal, group: str) -> tuple:
    """The TF32 pairs a fold keeps: those of every other source group."""
    return tuple(pair for pair in pairs if cal.source_group(pair[0].row.source) != group)


def leave_source_out(pts, catalog, cal, pairs=()) -> list[Result]:
    out = []
    for group in sorted({cal.source_group(p.row.source) for p in pts}):
        train = tuple(p for p in pts if cal.source_group(p.row.source) != group)
        test = [p for p in pts if cal.source_group(p.row.source) == group]
        out += _predict_fold(train, test, catalog, cal, group, False, _pairs_without(pairs, cal, group))
    return out


def leave_device_group_out(pts, catalog, cal, pairs=()) -> list[Result]:
    out = []
    for group in sorted({p.device.group for p in pts}):
        train = tuple(p for p in pts if p.device.group != group)
        kept = tuple(pair for pair in pairs if pair[0].device.group != group)
        out += _predict_fold(train, [p for p in pts if p.device.group == group], catalog, cal, group, True, kept)
    return out


def check_rows(pts, catalog, cal, pairs=()) -> list[Result]:
    """calibration.json's check rows (models the fit cannot represent yet): each predicted for a user's spec by the
    fit without its source group, as the fitted rows are; never fitted themselves."""
    checks, out = rate_fit.points(catalog, cal, cal.check_rows), []
    for group in sorted({cal.source_group(p.row.source) for p in checks}):
        train = tuple(p for p in pts if cal.source_group(p.row.source) != group)
        test = [p for p in checks if cal.source_group(p.row.source) == group]
        out += [r for r in _predict_fold(train, test, catalog, cal, group, False, _pairs_without(pairs, cal, group))
                if r.way == HEADLINE]
    return out


# ----------------------------------------------------------------------------- bands and coverage
def band(ratios: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(ratios, n=200, method="inclusive")
    return q[round(BAND_PERCENTILES[0] * 2) - 1], q[round(BAND_PERCENTILES[1] * 2) - 1]


def bands(loso: list[Result], devout: list[Result]) -> dict[str, dict]:
    """residuals as calibration_fit.json stores them: band_{seen|unseen}_{kind}; unseen also takes the whole
    device groups left out. Each from predictions made the way the plan makes them for that kind of spec (a `code`
    spec whose code showed nothing is an `auto` one, already counted by the `auto` way)."""
    out = {}
    loso, devout = ([r for r in rs if not (r.way == "code" and r.kind == "auto") and not r.refused]
                    for rs in (loso, devout))
    for kind in WAYS:
        seen = [r.ratio for r in loso if r.kind == kind and r.seen]
        unseen = [r.ratio for r in loso if r.kind == kind and not r.seen] + [r.ratio for r in devout if r.kind == kind]
        for name, ratios in (("seen", seen), ("unseen", unseen)):
            if len(ratios) >= 2:
                lo, hi = band(ratios)
                out[f"band_{name}_{kind}"] = {"ratio_low": round(lo, 4), "ratio_high": round(hi, 4)}
    out["band_percentiles"] = list(BAND_PERCENTILES)
    return out


def plan_band(r: Result, residuals: dict) -> tuple[float, float] | None:
    """The band modelled_rate states for this prediction, given these residuals (the same widening)."""
    res = residuals.get(f"band_{'seen' if r.seen else 'unseen'}_{r.kind}")
    if not res:
        return None
    return min(res["ratio_low"], r.span[0]), max(res["ratio_high"], r.span[1])


def in_band(loso: list[Result], devout: list[Result], way: str) -> tuple[set[str], int]:
    """The rows whose published figure lies in the band the plan would state, that band made without their own
    source group's rows, and how many rows were scored."""
    inside, total = set(), 0
    for group in sorted({r.source_group for r in loso}):
        res = bands([q for q in loso if q.source_group != group], [q for q in devout if q.source_group != group])
        for r in (q for q in loso if q.source_group == group and q.way == way):
            b = plan_band(r, res)
            total += 1
            if b is not None and not r.refused and b[0] <= r.ratio <= b[1]:
                inside.add(r.point.row.id)
    return inside, total


def coverage(loso: list[Result], devout: list[Result], way: str) -> tuple[int, int]:
    inside, total = in_band(loso, devout, way)
    return len(inside), total


# ----------------------------------------------------------------------------- the report
CLASSES = (
    ("single-GPU", lambda r: r.nodes * r.ranks_per_node == 1),
    ("8-GPU DDP", lambda r: r.nodes == 1 and r.ranks_per_node == 8 and r.strategy == "ddp"),
    ("multi-node FSDP LLMs", lambda r: r.nodes > 1 and r.strategy != "ddp"),
    ("multi-node DDP", lambda r: r.nodes > 1 and r.strategy == "ddp"),
    ("CNNs", None),                          # by family: in_class
    ("ViTs", None),
    ("encoders (BERT)", lambda r: "bert" in r.model),
    ("fp32", lambda r: r.precision == "fp32"),
    ("activation checkpointing", lambda r: r.checkpointing),
    ("eager attention (as published; a plan assumes fused)", lambda r: r.attention == "eager" and "res" not in r.model),
)


def in_class(name: str, test, r: Result) -> bool:
    return test(r.point.row) if test else r.point.shape.family == {"CNNs": "cnn", "ViTs": "vision"}[name]


def summary(results: list[Result]) -> dict:
    """Error figures of the rows a plan states a rate for (a refused row is counted by `refused`, not here)."""
    refused = sorted(r.point.row.id for r in results if r.refused)
    results = [r for r in results if not r.refused]
    if not results:
        return {"rows": 0, "refused": refused}
    errors = [abs(r.error) for r in results]
    worst = max(results, key=lambda r: max(r.ratio, 1 / r.ratio))
    return {"rows": len(results), "median_abs_error": round(statistics.median(errors), 4),
            "median_error": round(statistics.median(r.error for r in results), 4),
            "worst_ratio": round(max(worst.ratio, 1 / worst.ratio), 3), "worst_row": worst.point.row.id,
            "refused": refused}


def _line(name: str, results: list[Result]) -> str:
    s = summary(results)
    if not s["rows"]:
        return f"| {name} | 0 | - | - | every row refused for memory ({', '.join(s['refused'])}) |"
    rows = f"{s['rows']}" + (f" (+{len(s['refused'])} refused)" if s["refused"] else "")
    return (f"| {name} | {rows} | {s['median_abs_error']:.1%} | {s['median_error']:+.1%} | "
            f"x{s['worst_ratio']:.2f} ({s['worst_row']}) |")


def breakdown(results: list[Result], key, title: str) -> list[str]:
    lines = [f"### By {title}", "", f"| {title} | rows | median abs error | median error (bias) | worst |",
             "|---|---|---|---|---|"]
    lines += [_line(name, [r for r in results if key(r) == name]) for name in sorted({key(r) for r in results})]
    return lines + [""]


def by_class(results: list[Result], inside: set[str]) -> list[str]:
    """Each class against the four targets: median, bias, worst row and the share inside the plan's band."""
    lines = ["### By class of job (a row may be in several)", "",
             "| class | rows | median abs error | median error (bias) | worst | in band |", "|---|---|---|---|---|---|"]
    for name, test in CLASSES:
        rows = [r for r in results if in_class(name, test, r)]
        if not rows:
            lines.append(f"| {name} | 0 | - | - | no published row in the calibration | - |")
            continue
        n = sum(r.point.row.id in inside for r in rows)
        lines.append(f"{_line(name, rows)} {n}/{len(rows)} = {n / len(rows):.0%} |")
    return lines + [""]


def scaling(loso: list[Result]) -> list[tuple[str, str, float, float]]:
    """(row, base row, published, predicted) scaling efficiency for rows that name a scaling base; both are
    predicted by the same out-of-source fit (a row and its base share their source)."""
    by_id = {r.point.row.id: r for r in loso}
    out = []
    for r in loso:
        base = by_id.get(r.point.row.scaling_base or "")
        if base is None:
            continue
        ranks = r.point.row.nodes * r.point.row.ranks_per_node / (base.point.row.nodes * base.point.row.ranks_per_node)
        out.append((r.point.row.id, base.point.row.id, r.published / base.published / ranks,
                    r.predicted / base.predicted / ranks))
    return out


def spot_check() -> list[str]:
    """The plan's layout-level Spot event rate for 4 nodes of the traced type against the 4-node traces."""
    table = load_hazard_table()
    traced_band, traces = table.reference_band, table.layout_traces
    rate, per_event = table.layout_events(traced_band, 4)
    lines = ["## Spot reclaims of a 4-node layout (skypilot-org/spot-traces, 4 x p3.2xlarge)", "",
             "Events that take a whole layout down (from 4 running nodes) per hour the layout was whole, and nodes "
             "lost per event. Each trace is also predicted from the other two (leave one trace out).", "",
             "| trace | events | hours whole | events/h | nodes/event | predicted events/h from the others |",
             "|---|---|---|---|---|---|"]
    for name, t in traces.items():
        rest = [v for k, v in traces.items() if k != name]
        others = sum(v["events"] for v in rest) / sum(v["whole_hours"] for v in rest)
        lines.append(f"| {name} | {t['events']} | {t['whole_hours']:.1f} | {t['events'] / t['whole_hours']:.3f} | "
                     f"{t['nodes_lost'] / t['events']:.2f} | {others:.3f} |")
    events, hours, lost = (sum(t[k] for t in traces.values()) for k in ("events", "whole_hours", "nodes_lost"))
    lines += ["", f"All traces: {events / hours:.3f} events/h, {lost / events:.2f} nodes per event. The plan's model "
              f"for 4 nodes in the traced band ({traced_band}): {rate:.3f} events/h, {per_event:.2f} nodes per event.", ""]
    return lines


WAY_WORDS = {"code": "the spec a user writes (shape, stack auto) with the script's code read: what a plan gives a user "
                     "whose script is readable (the headline)",
             "auto": "the same spec, the script's code not read (the stack centred between the fitted stacks)",
             "stack": "the same spec carrying model.stack = the source's label (comparison: the former per-source-label "
                      "figure, which also had an eager-attention term no plan applies, read 15.4% on 101 rows)",
             "size": "transformers given by params and flops_per_sample alone (stack auto)"}
START = ("21.4% median, -0.9% bias, worst x2.10 (lambda-bertl-a100-80gb-8gpu), 111/125 = 89% in band; 8-GPU DDP 37.2% "
         "(+32.8%, worst x2.10)")
BEFORE = ("25.4% median, -11.3% bias, worst x2.46 (lambda-bertb-v100-1gpu-fp32), 105/125 = 84% in band (78% as then "
          "measured, without the TF32 widening the plan gave fp32 bands); nvidia-dle 33.9% (+14.0%), fp32 36.9% (-31.3%)")


BEFORE_FUSED = ("Before fused stacks (tuned, compile) paid only a share of the eager memory traffic (the same "
                "evaluation at commit 848d8dd, tensor parallelism included): 23.8% median, +9.2% bias, worst x2.21 "
                "(lambda-bertb-a100-80gb-1gpu-fp32), 113/125 = 90% in band; with the code not read 22.0%, -2.1%, "
                "x2.11, 101/125 = 81%.")


BEFORE_SIMT = ("Before fp32 on the CUDA cores took its fitted gain (the same evaluation at commit 00c316f, every fp32 "
               "row's matmuls at the die's tensor-core efficiency, a V100's fp32 rows fitted as efficiencies): 18.6% "
               "median, +7.1% bias, worst x2.10 (lambda-bertl-a100-80gb-1gpu-fp32), 112/125 = 90% in band; fp32 "
               "34.7% (-4.4%); with the code not read 23.1%, -5.6%, x2.05, 102/125 = 82%.")


def tf32_pair_table(full, pairs, cal) -> list[str]:
    """The TF32 on/off pairs (calibration.json `tf32_pairs`), what gamma makes of them, and gamma in each fold."""
    out = ["## fp32 on the CUDA cores: the TF32 pairs", "",
           "fp32 whose matmuls run without tensor cores (TF32 off, upstream PyTorch's default for matmuls; a V100) "
           "reaches a larger share of its own peak than the tensor cores reach of theirs (perf/fp32_math.py): the "
           "die's efficiency times (P_16 / P_fp32) ** gamma, the path's rate never above its peak. gamma is fitted "
           "to published runs of one script, batch and GPU with TF32 off and on, which are never fitted as rows "
           "nor scored; a row of fp32 on the CUDA cores is predicted (and scored) with that gain, never fitted as "
           f"an efficiency. Fitted on every pair: gamma = {full.simt_exponent:g}.", "",
           "| pair (TF32 off / on) | published off / on | published ratio | predicted ratio | with gamma 0 |",
           "|---|---|---|---|---|"]
    for off, on in pairs:
        predict = rate_fit.pair_ratio(full, off, on)
        out.append(f"| {off.row.id} / {on.row.id} | {off.row.samples_per_s:g} / {on.row.samples_per_s:g} | "
                   f"x{off.seconds_per_sample / on.seconds_per_sample:.2f} | x{predict(full.simt_exponent):.2f} | "
                   f"x{predict(0.0):.2f} |")
    pts = rate_fit.points(load_catalog(), cal)
    folds = [(g, rate_fit.fit(tuple(p for p in pts if cal.source_group(p.row.source) != g),
                              _pairs_without(pairs, cal, g)).simt_exponent)
             for g in sorted({cal.source_group(p.row.source) for p in pts})]
    return out + ["", "gamma in each leave-one-source-out fold: " + ", ".join(f"{g} {v:g}" for g, v in folds)
                  + " (a fold without pairs would take 0: the former model).", ""]


def report(loso, devout, full, cal, checks=(), pairs=()) -> str:
    user = [r for r in loso if r.way == HEADLINE]
    s = summary(user)
    b = bands(loso, devout)
    inside_ids, total = in_band(loso, devout, HEADLINE)
    inside = len(inside_ids)
    met = (s["median_abs_error"] <= TARGET_MEDIAN, abs(s["median_error"]) <= TARGET_BIAS,
           s["worst_ratio"] <= TARGET_WORST_RATIO, inside / total >= TARGET_COVERAGE, not s["refused"])
    refused = {r.point.row.id: r.refused for r in user if r.refused}
    yes = lambda ok: "yes" if ok else "NO"  # noqa: E731
    lines = ["# Throughput model accuracy", "",
             "Written by `scripts/eval_model.py` (do not edit by hand). Every published row is turned into the spec "
             "a user would write for it (its model's size and shape, precision, activation checkpointing, tensor "
             "parallelism, batch per "
             "GPU; a script of the user's own, so `model.stack: auto`) with its `entrypoint.source_dir` holding the "
             "code of the script that produced the row, and predicted by the plan's own functions "
             "(`usecases.plan.read_code`, which reads the stack from the code as `trainctl plan` does, "
             "`planner.ranking.model_shape`, `perf.estimator.modelled_rate`) through the network model of the row's "
             "cluster. The code is a verbatim excerpt of the public script (calibration.json `code_evidence`: the "
             "lines that bear on the stack, with repository, path and commit; see \"Whose code was read\" below). "
             "Leave-one-source-out: each group of resembling sources is "
             "predicted by a model fitted on all the others. Source groups: " + "; ".join(
                 f"`{g}` ({', '.join(m)})" for g, m in sorted(cal.source_groups.items())) + ".", "",
             "## Summary: the predictor a user gets (stack auto, the script's code read)", "",
             "| check | result | target | met |", "|---|---|---|---|",
             f"| median absolute error, leave-one-source-out | {s['median_abs_error']:.1%} | {TARGET_MEDIAN:.0%} | "
             f"{yes(met[0])} |",
             f"| signed bias (median of predicted/published - 1) | {s['median_error']:+.1%} | within "
             f"±{TARGET_BIAS:.0%} | {yes(met[1])} |",
             f"| worst row, either direction | x{s['worst_ratio']:.2f} ({s['worst_row']}) | x{TARGET_WORST_RATIO:g} | "
             f"{yes(met[2])} |",
             f"| published figure inside the band the plan states (bands made without the row's source group) | "
             f"{inside}/{total} = {inside / total:.0%} | {TARGET_COVERAGE:.0%} | {yes(met[3])} |",
             f"| published runs the plan refuses for memory on the cluster they ran on (it states no rate for them: "
             f"not in the figures above; never inside a band) | {len(refused)}/{total}"
             + "".join(f"; {k}: {v}" for k, v in sorted(refused.items())) + f" | 0 | {yes(met[4])} |", "",
             *check_summary(user, list(checks)),
             "Until commit 6a5f7b2 the headline was the same spec whose code is not read (the stack centred "
             "between the fitted stacks: the second row of the table below, 22.0% median, -1.4% bias, worst x2.08, "
             "111/125 in band); reading the script's code, as a plan does for a user's readable source_dir, moves "
             "the rows whose code shows a stack from the centre to that stack's fitted efficiency (\"By stack label "
             "-> stack read\" below).", "",
             f"Before the Lambda 8-GPU rows took the PCIe link they ran on (the same evaluation at commit f98919d): "
             f"{START}. Before the memory-traffic term (commit 2590c11): {BEFORE}. {BEFORE_FUSED} {BEFORE_SIMT}", "",
             "The same evaluation for the other ways a spec can describe a row:", "",
             "| spec | rows | median abs error | bias | worst | in band |", "|---|---|---|---|---|---|"]
    for way in WAYS:
        w, (i, t) = summary([r for r in loso if r.way == way]), coverage(loso, devout, way)
        lines.append(f"| {WAY_WORDS[way]} | {w['rows']} | {w['median_abs_error']:.1%} | {w['median_error']:+.1%} | "
                     f"x{w['worst_ratio']:.2f} ({w['worst_row']}) | {i}/{t} = {i / t:.0%} |")
    lines += ["", "Bands (published/predicted, "
              f"percentiles {BAND_PERCENTILES[0]:g} to {BAND_PERCENTILES[1]:g} of the out-of-source predictions of "
              "each kind; `unseen`: no row of the device and family in the fit, and whole device groups left out). "
              "A spec whose stack is not known also gets its band widened to hold what every fitted stack would "
              "give its model (`compute_rate.stack_rate_span`: their efficiencies span "
              f"x{full.stack_span('auto')[0]:.2f} to x{full.stack_span('auto')[1]:.2f} of the centred one, and a "
              "fused stack pays only its share of the eager memory traffic):", ""]
    lines += [f"- {k.removeprefix('band_').replace('_', ' ')}: x{v['ratio_low']:.2f} to x{v['ratio_high']:.2f}"
              for k, v in sorted(b.items()) if k.startswith("band_") and isinstance(v, dict)]
    lines += ["", "Fitted on all rows (the stack labels are the fit's: the rows it learns from say how they were run; "
              "a plan only has what its spec and its code say):", *fit_words(full), ""]
    lines += ["## Leave-one-source-out, the predictor a user gets (code read)", ""]
    lines += by_class(user, inside_ids)
    centred = [r for r in loso if r.way == "auto"]
    lines += ["The same classes when the script's code is not read (stack centred, its own bands):", ""]
    lines += by_class(centred, in_band(loso, devout, "auto")[0])
    lines += breakdown(user, lambda r: r.point.shape.family, "family")
    lines += breakdown(user, lambda r: r.point.row.device, "device")
    lines += breakdown(user, lambda r: f"{r.point.row.stack} -> {r.read}",
                       "stack label of the source -> stack the plan read from its code")
    lines += breakdown(user, lambda r: r.held_out, "source group")
    lines += breakdown([r for r in devout if r.way == HEADLINE], lambda r: r.held_out, "device group left out whole")
    lines += ["## Size-only transformers (params and flops_per_sample, no shape)", ""]
    lines += breakdown([r for r in loso if r.way == "size"], lambda r: r.point.shape.family, "family")
    lines += tf32_pair_table(full, pairs, cal)
    lines += _row_table(loso, cal) + [""] + evidence_table(loso, cal) + check_table(list(checks))
    lines += _scaling_table(scaling(user)) + [""] + spot_check()
    return "\n".join(lines).rstrip() + "\n"


def check_summary(user: list[Result], checks: list[Result]) -> list[str]:
    if not checks:
        return []
    c, both = summary(checks), summary(user + checks)
    return warned_words(user, checks) + [f"Not in these figures: {c['rows']} check rows (calibration.json `check_rows`, published, scored the same "
            f"way, never fitted: models the fit cannot represent yet) are off by a median {c['median_abs_error']:.0%} "
            f"(bias {c['median_error']:+.0%}, worst x{c['worst_ratio']:.1f}, {c['worst_row']}); with them the headline "
            f"would read median {both['median_abs_error']:.1%}, bias {both['median_error']:+.1%}, worst "
            f"x{both['worst_ratio']:.2f}. See \"Check rows\" below.", ""]


def warned_words(user: list[Result], checks: list[Result]) -> list[str]:
    """The plan's line for a CNN given by its size (estimator.cnn_by_size_words): on how many check rows and
    fitted rows it is said. It states what the model assumes; it does not detect an architecture."""
    cnn = [r for r in user if r.point.shape.family == "cnn"]
    return ["A CNN has no shape in a spec: the plan models it on the fit's ResNets and says so in one warning, with "
            "the check rows' figures (calibration_fit.json `check_rows`) and the price of a `trainctl bench`. "
            f"Check rows it is said for: {sum(r.warned for r in checks)}/{len(checks)}; fitted CNN rows: "
            f"{sum(r.warned for r in cnn)}/{len(cnn)} (a statement of the assumption, not a detector: the size "
            "does not tell a ResNet from a depthwise-separable network).", ""]


def check_table(checks: list[Result]) -> list[str]:
    if not checks:
        return []
    out = ["## Check rows: published, scored, not fitted", "",
           "| row | device | precision | layout | predicted (user's spec) | published | error | held out |",
           "|---|---|---|---|---|---|---|---|"]
    for r in checks:
        row = r.point.row
        out.append(f"| {row.id} | {row.device} | {row.precision} | {row.nodes}x{row.ranks_per_node} {row.strategy}, "
                   f"batch {row.micro_batch} | {r.predicted:,.1f} | {row.samples_per_s:,.1f} | {r.error:+.1%} | "
                   f"{r.held_out} |")
    return out + [""]


def fit_words(f: compute_rate.Fit) -> list[str]:
    def effects(d):
        return ", ".join(f"{k} x{math.exp(v):.2f}" for k, v in sorted(d.items()))
    return [f"- size knee h0 = {f.size_knee:g}; eager memory traffic (amp, and a stack not known; "
            f"{' and '.join(compute_rate.FUSED_STACKS)} move {f.fused_traffic:g} of it): CNN {f.cnn_traffic:g} B "
            f"per FLOP, transformer "
            f"{f.transformer_traffic:g} x its activation bytes; synchronous step "
            f"loss on more than one rank {f.sync_loss:.1%} (median of published 1-GPU vs n-GPU pairs)",
            f"- die group: {effects(f.groups)}", f"- model family: {effects(f.families)}",
            f"- software stack: {effects(f.stacks)}; a stack not known: centred at "
            f"x{math.exp(f.stack_centre()):.2f}",
            f"- fp32 on the CUDA cores: gamma = {f.simt_exponent:g} (the TF32 pairs below)"]


def _row_table(loso, cal) -> list[str]:
    out = ["## Every row, predicted without its source group", "",
           "| row | device | precision | stack label | read from its code | layout | predicted (code read) | "
           "code not read | with model.stack | size only | published | error (code read) | held out |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    by = {(r.point.row.id, r.way): r for r in loso}
    for r in (q for q in loso if q.way == HEADLINE):
        row = r.point.row
        layout = f"{row.nodes}x{row.ranks_per_node} {row.strategy}" + \
            (f" tensor-parallel {row.tensor_parallel}" if row.tensor_parallel > 1 else "") + \
            f", batch {row.micro_batch}" + \
            (f"x{row.accumulation}" if row.accumulation > 1 else "")
        other = [by.get((row.id, w)) for w in ("auto", "stack", "size")]
        cells = " | ".join("-" if not o else "refused" if o.refused else f"{o.predicted:,.1f}" for o in other)
        out.append(f"| {row.id} | {row.device} | {row.precision} | {row.stack} | {r.read} | {layout} | "
                   f"{r.predicted:,.1f} | {cells} | {row.samples_per_s:,.1f} | "
                   f"{f'refused ({r.error:+.1%} if planned)' if r.refused else f'{r.error:+.1%}'} | {r.held_out} |")
    out += ["", "Calibration sources (every row above is from one of these; each is fitted on when it is not the "
            "one left out; a source of check rows only is scored, never fitted):",
            ""] + [f"- `{k}`: {v}" for k, v in sorted(cal.sources.items())]
    return out


def evidence_table(loso, cal) -> list[str]:
    """Per source and script: where its code excerpt is from and what the plan read from it."""
    out = ["## Whose code was read", "",
           "Each row's `entrypoint.source_dir` holds verbatim lines of the public script that produced it "
           "(calibration.json `code_evidence`: the imports, mixed precision, fused kernels and optimizers, compile, "
           "FSDP/DDP wrappers and trainers, with the try/except lines around guarded imports), read by the plan's "
           "`read_code` and `infer_stack`. The stack found in these lines is the one `infer_stack` finds in the whole "
           "source folder of the script at that commit (checked when the excerpts were taken).", "",
           "| source | rows' models | files (repository, commit, date) | stack read | what the plan found |",
           "|---|---|---|---|---|"]
    for source in sorted(cal.code_evidence):
        for entry in cal.code_evidence[source]:
            first = next((r for r in loso if r.way == HEADLINE and r.point.row.source == source
                          and r.point.row.model in entry.get("models", (r.point.row.model,))), None)
            if first is None:
                continue
            code = row_code(first.point.row, cal.shapes[first.point.row.model])[1]
            files = "; ".join(f"`{f['repo']}` {f['path']} @ {f['commit'][:10]} ({f['date']})" for f in entry["files"])
            found = "; ".join(code.evidence + code.notes) if code else "-"
            out.append(f"| {source} | {', '.join(entry.get('models', ['all']))} | {files} | {first.read} | {found} |")
    return out + [""]


def _scaling_table(scale) -> list[str]:
    out = ["## Scaling efficiency (per-rank throughput relative to the base layout), out of source", "",
           "| row | base | published | predicted | difference |", "|---|---|---|---|---|"]
    out += [f"| {a} | {b} | {p:.3f} | {q:.3f} | {q - p:+.3f} |" for a, b, p, q in scale]
    return out


def outputs() -> tuple[str, str]:
    catalog, cal = load_catalog(), load_calibration()
    pts, pairs = rate_fit.points(catalog, cal), rate_fit.pair_points(catalog, cal)
    loso, devout = leave_source_out(pts, catalog, cal, pairs), leave_device_group_out(pts, catalog, cal, pairs)
    full = rate_fit.fit(pts, pairs)
    checks = check_rows(pts, catalog, cal, pairs)
    text = report(loso, devout, full, cal, checks, pairs)
    fit_doc = {"generated_by": "scripts/eval_model.py", "calibration_date": cal.date, "fit": full.to_json(),
               **bands(loso, devout), "leave_source_out": summary([r for r in loso if r.way == HEADLINE]),
               "leave_source_out_code_not_read": summary([r for r in loso if r.way == "auto"])}
    if checks:
        fit_doc["check_rows"] = {"models": sorted({r.point.row.model for r in checks}),
                                 "predicted_over_published": [round(min(1 / r.ratio for r in checks), 2),
                                                              round(max(1 / r.ratio for r in checks), 2)]}
    return text, json.dumps(fit_doc, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed outputs are stale")
    args = parser.parse_args(argv)
    text, residuals = outputs()
    if args.check:
        stale = [str(p) for p, t in ((REPORT_PATH, text), (RESIDUALS_PATH, residuals))
                 if not p.exists() or p.read_text() != t]
        if stale:
            print(f"stale: {', '.join(stale)}; run python scripts/eval_model.py", file=sys.stderr)
            return 1
        return 0
    REPORT_PATH.write_text(text)
    RESIDUALS_PATH.write_text(residuals)
    s = json.loads(residuals)["leave_source_out"]
    print(f"leave-one-source-out (the user's spec, code read): median {s['median_abs_error']:.1%}, "
          f"bias {s['median_error']:+.1%}, "
          f"worst x{s['worst_ratio']:.2f} ({s['worst_row']}); wrote {REPORT_PATH.relative_to(ROOT)} and "
          f"{RESIDUALS_PATH.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
