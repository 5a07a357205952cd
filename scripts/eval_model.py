"""How good is trainctl's throughput model? Leave each published measurement out in turn and predict it.

    python scripts/eval_model.py            # writes docs/model-accuracy.md and trainctl/catalog/calibration_fit.json
    python scripts/eval_model.py --check    # exit 1 if either file is not what this run would write

For every row of trainctl/catalog/calibration.json: fit the model on all the other rows, predict the row's
whole-layout samples/s (compute model + the network model of the row's cluster) and compare with the
published figure. Then the same with each device group left out entirely: the error to expect on hardware
the table has no row for (L4, V100, and A10G, which only shares its die with the RTX 3090). Scaling
efficiency (per-rank throughput relative to the row's `scaling_base` layout) is compared where published.

The 10th and 90th percentiles of published/predicted become the throughput band of every modelled
estimate (trainctl/catalog/calibration_fit.json, read by trainctl/perf_layout.py).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainctl.perf import compute_rate as perf_fit  # noqa: E402
from trainctl.catalog import RESIDUALS_PATH, load_calibration, load_catalog  # noqa: E402

REPORT_PATH = ROOT / "docs" / "model-accuracy.md"
TARGET_MEDIAN = 0.15
TARGET_WORST = 0.35
TARGET_SCALING = 0.10


@dataclass(frozen=True)
class Result:
    point: perf_fit.Point
    predicted: float

    @property
    def published(self) -> float:
        return self.point.row.samples_per_s

    @property
    def error(self) -> float:
        return self.predicted / self.published - 1.0


def leave_one_out(pts: tuple[perf_fit.Point, ...]) -> list[Result]:
    out = []
    for i, p in enumerate(pts):
        f = perf_fit.fit(pts[:i] + pts[i + 1:])
        out.append(Result(p, perf_fit.predict_layout(p, f)))
    return out


def leave_group_out(pts: tuple[perf_fit.Point, ...]) -> list[Result]:
    out = []
    for group in sorted({p.device.group for p in pts}):
        rest = tuple(p for p in pts if p.device.group != group)
        f = perf_fit.fit(rest)
        out.extend(Result(p, perf_fit.predict_layout(p, f)) for p in pts if p.device.group == group)
    return out


def summary(results: list[Result]) -> dict:
    ratios = [r.published / r.predicted for r in results]
    deciles = statistics.quantiles(ratios, n=10, method="inclusive")
    errors = [abs(r.error) for r in results]
    worst = max(results, key=lambda r: abs(r.error))
    return {"rows": len(results), "median_abs_error": round(statistics.median(errors), 4),
            "worst_abs_error": round(abs(worst.error), 4), "worst_row": worst.point.row.id,
            "ratio_p10": round(deciles[0], 4), "ratio_p90": round(deciles[-1], 4)}


def scaling(pts: tuple[perf_fit.Point, ...]) -> list[tuple[str, str, float, float]]:
    """(row, base row, published efficiency, predicted efficiency) for rows that name a scaling base.
    Both the row and its base are left out of the fit that predicts them."""
    by_id = {p.row.id: p for p in pts}
    out = []
    for p in pts:
        base_id = p.row.scaling_base
        if base_id is None or base_id not in by_id:
            continue
        b = by_id[base_id]
        f = perf_fit.fit(tuple(q for q in pts if q.row.id not in (p.row.id, base_id)))
        published = (p.row.samples_per_s / _ranks(p)) / (b.row.samples_per_s / _ranks(b))
        predicted = (perf_fit.predict_layout(p, f) / _ranks(p)) / (perf_fit.predict_layout(b, f) / _ranks(b))
        out.append((p.row.id, base_id, published, predicted))
    return out


def _ranks(p: perf_fit.Point) -> int:
    return p.row.nodes * p.row.ranks_per_node


def fit_words(f: perf_fit.Fit) -> list[str]:
    groups = ", ".join(f"{k} {v:.2f}" for k, v in sorted(f.family_efficiency.items()))
    return [f"- size knee h0 = {f.size_knee:g} (a GEMM of width h reaches h/(h+h0) of the group's efficiency)",
            f"- attention-score traffic factor k = {f.attention_factor:g} (eager attention rows only)",
            f"- efficiency per device group and model family: {groups}; a group without rows: "
            f"{f.fallback_efficiency:.2f}"]


def report(loo: list[Result], out: list[Result], scale: list, full: perf_fit.Fit, cal) -> str:
    s, g = summary(loo), summary(out)
    worst_scale = max((abs(p - q) for _, _, p, q in scale), default=0.0)
    met = (s["median_abs_error"] <= TARGET_MEDIAN, s["worst_abs_error"] <= TARGET_WORST,
           worst_scale <= TARGET_SCALING)
    lines = ["# Throughput model accuracy", "",
             "Written by `scripts/eval_model.py` (do not edit by hand). Every row of "
             "`trainctl/catalog/calibration.json` is predicted by a model fitted on all the other rows "
             "(leave-one-out), as whole-layout samples/s: the calibrated compute rate of one rank "
             "(`trainctl/perf_fit.py`) through the network model of the row's cluster (`trainctl/perf.py`).", "",
             "## Summary", "",
             "| check | result | target | met |", "|---|---|---|---|",
             f"| median absolute error, leave-one-out | {s['median_abs_error']:.1%} | {TARGET_MEDIAN:.0%} | "
             f"{'yes' if met[0] else 'NO'} |",
             f"| worst row, leave-one-out | {s['worst_abs_error']:.1%} ({s['worst_row']}) | {TARGET_WORST:.0%} | "
             f"{'yes' if met[1] else 'NO'} |",
             f"| worst multi-node scaling efficiency error ({len(scale)} published) | {worst_scale:.3f} | "
             f"{TARGET_SCALING:.2f} | {'yes' if met[2] else 'NO'} |",
             f"| median absolute error, whole device group left out | {g['median_abs_error']:.1%} "
             f"(worst {g['worst_abs_error']:.1%}) | - | - |", "",
             f"Throughput band of a modelled estimate (published/predicted, 10th-90th percentile): "
             f"x{s['ratio_p10']:.2f} to x{s['ratio_p90']:.2f} for a device with published rows; "
             f"x{g['ratio_p10']:.2f} to x{g['ratio_p90']:.2f} for one without (its whole group left out).", "",
             "Fitted on all rows:", *fit_words(full), ""]
    lines += _row_table(loo, cal) + [""] + _scaling_table(scale) + [""] + _group_table(out)
    return "\n".join(lines) + "\n"


def _row_table(loo: list[Result], cal) -> list[str]:
    out = ["## Leave-one-out, per row", "",
           "| row | device | layout | predicted samples/s | published | error | source |", "|---|---|---|---|---|---|---|"]
    for r in loo:
        row = r.point.row
        layout = f"{row.nodes}x{row.ranks_per_node} {row.strategy}, batch {row.micro_batch}" + \
            (f"x{row.accumulation}" if row.accumulation > 1 else "")
        out.append(f"| {row.id} | {row.device} | {layout} | {r.predicted:,.1f} | {row.samples_per_s:,.1f} | "
                   f"{r.error:+.1%} | {row.source} |")
    out += ["", "Sources:", ""] + [f"- `{k}`: {v}" for k, v in sorted(cal.sources.items())]
    return out


def _scaling_table(scale) -> list[str]:
    out = ["## Multi-node scaling efficiency (per-rank throughput relative to the base layout)", "",
           "The base is the smallest layout of the same series with the same gradient-accumulation regime "
           "(calibration.json `scaling_rule`); row and base are both left out of the fit that predicts them.", "",
           "| row | base | published | predicted | difference |", "|---|---|---|---|---|"]
    out += [f"| {a} | {b} | {p:.3f} | {q:.3f} | {q - p:+.3f} |" for a, b, p, q in scale]
    return out


def _group_table(out: list[Result]) -> list[str]:
    lines = ["## Whole device group left out (the error to expect on hardware without published rows)", "",
             "| group | rows | median abs error | worst |", "|---|---|---|---|"]
    for group in sorted({r.point.device.group for r in out}):
        errs = [abs(r.error) for r in out if r.point.device.group == group]
        lines.append(f"| {group} | {len(errs)} | {statistics.median(errs):.1%} | {max(errs):.1%} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed outputs are stale")
    args = parser.parse_args(argv)
    catalog, cal = load_catalog(), load_calibration()
    pts = perf_fit.points(catalog, cal)
    loo, out = leave_one_out(pts), leave_group_out(pts)
    scale = scaling(pts)
    text = report(loo, out, scale, perf_fit.fit(pts), cal)
    residuals = json.dumps({"generated_by": "scripts/eval_model.py", "calibration_date": cal.date,
                            "row_loo": summary(loo), "group_out": summary(out)}, indent=1) + "\n"
    if args.check:
        stale = [str(p) for p, t in ((REPORT_PATH, text), (RESIDUALS_PATH, residuals))
                 if not p.exists() or p.read_text() != t]
        if stale:
            print(f"stale: {', '.join(stale)}; run python scripts/eval_model.py", file=sys.stderr)
            return 1
        return 0
    REPORT_PATH.write_text(text)
    RESIDUALS_PATH.write_text(residuals)
    s = summary(loo)
    print(f"leave-one-out: median {s['median_abs_error']:.1%}, worst {s['worst_abs_error']:.1%} "
          f"({s['worst_row']}); wrote {REPORT_PATH.relative_to(ROOT)} and {RESIDUALS_PATH.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
