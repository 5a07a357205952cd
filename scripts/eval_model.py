"""How good is trainctl's throughput model on a source it never saw? Leave each group of sources out and predict it.

    python scripts/eval_model.py            # writes docs/model-accuracy.md and trainctl/catalog/calibration_fit.json
    python scripts/eval_model.py --check    # exit 1 if either file is not what this run would write

Leave-one-source-out: the rows of one source group (calibration.json `source_groups`: sources that resemble each
other, such as two tables of the same scripts, are one group) are predicted by a model fitted on every other
group, as whole-layout samples/s (compute model + the network model of the row's cluster). That is how a user's
own script meets the model: nothing of its stack, its tuning or its benchmark was in the fit. Then each device
group is left out whole: the error on hardware without published rows (L4; the A10G, which has only the A10's).

The band of a modelled estimate is the 5th-95th percentile of published/predicted over those out-of-source
predictions: one for a device with rows of the job's family, one for a device without (trainctl/catalog/
calibration_fit.json, read by the plan with the fit itself). Its coverage is checked honestly: each row is judged
against the band of the other source groups' rows. The Spot event model is checked against the multi-node traces.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainctl.catalog import RESIDUALS_PATH, load_calibration, load_catalog  # noqa: E402
from trainctl.perf import compute_rate  # noqa: E402
from trainctl.planner.spot.hazard import load_hazard_table  # noqa: E402

REPORT_PATH = ROOT / "docs" / "model-accuracy.md"
TARGET_MEDIAN = 0.20
TARGET_WORST_RATIO = 2.0
TARGET_COVERAGE = 0.85
BAND_PERCENTILES = (2.5, 97.5)


@dataclass(frozen=True)
class Result:
    point: compute_rate.Point
    predicted: float
    held_out: str          # the source group (or device group) left out
    seen: bool             # rows of this device and family were in the fit that predicted it
    source_group: str      # the row's own source group

    @property
    def published(self) -> float:
        return self.point.row.samples_per_s

    @property
    def ratio(self) -> float:
        return self.published / self.predicted

    @property
    def error(self) -> float:
        return self.predicted / self.published - 1.0


def _seen(p: compute_rate.Point, train) -> bool:
    return any(q.row.device == p.row.device and q.shape.family == p.shape.family for q in train)


def leave_source_out(pts, cal) -> list[Result]:
    out = []
    for group in sorted({cal.source_group(p.row.source) for p in pts}):
        train = tuple(p for p in pts if cal.source_group(p.row.source) != group)
        f = compute_rate.fit(train)
        out += [Result(p, compute_rate.predict_layout(p, f), group, _seen(p, train), group)
                for p in pts if cal.source_group(p.row.source) == group]
    return out


def leave_device_group_out(pts, cal) -> list[Result]:
    out = []
    for group in sorted({p.device.group for p in pts}):
        f = compute_rate.fit(tuple(p for p in pts if p.device.group != group))
        out += [Result(p, compute_rate.predict_layout(p, f), group, False, cal.source_group(p.row.source))
                for p in pts if p.device.group == group]
    return out


def band(ratios: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(ratios, n=200, method="inclusive")
    return q[round(BAND_PERCENTILES[0] * 2) - 1], q[round(BAND_PERCENTILES[1] * 2) - 1]


def bands(loso: list[Result], devout: list[Result]) -> dict[str, tuple[float, float]]:
    """seen: out-of-source rows whose device and family were in the fit; unseen: the rest and whole device
    groups left out."""
    return {"seen": band([r.ratio for r in loso if r.seen]),
            "unseen": band([r.ratio for r in loso if not r.seen] + [r.ratio for r in devout])}


def coverage(loso: list[Result], devout: list[Result]) -> tuple[int, int]:
    """Rows whose published figure lies in the band the plan would give them, the band made without their
    own source group's rows."""
    inside = 0
    for r in loso:
        b = bands([q for q in loso if q.source_group != r.source_group],
                  [q for q in devout if q.source_group != r.source_group])["seen" if r.seen else "unseen"]
        inside += b[0] <= r.ratio <= b[1]
    return inside, len(loso)


def summary(results: list[Result]) -> dict:
    errors = [abs(r.error) for r in results]
    worst = max(results, key=lambda r: max(r.ratio, 1 / r.ratio))
    return {"rows": len(results), "median_abs_error": round(statistics.median(errors), 4),
            "median_error": round(statistics.median(r.error for r in results), 4),
            "worst_ratio": round(max(worst.ratio, 1 / worst.ratio), 3), "worst_row": worst.point.row.id}


def breakdown(results: list[Result], key, title: str) -> list[str]:
    lines = [f"### By {title}", "", f"| {title} | rows | median abs error | median error (bias) | worst |",
             "|---|---|---|---|---|"]
    for name in sorted({key(r) for r in results}):
        s = summary([r for r in results if key(r) == name])
        lines.append(f"| {name} | {s['rows']} | {s['median_abs_error']:.1%} | {s['median_error']:+.1%} | "
                     f"x{s['worst_ratio']:.2f} ({s['worst_row']}) |")
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
    traced_band = table.reference_band
    rate, per_event = table.layout_events(traced_band, 4)
    traces = table.layout_traces
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
    events = sum(t["events"] for t in traces.values())
    hours = sum(t["whole_hours"] for t in traces.values())
    lost = sum(t["nodes_lost"] for t in traces.values())
    lines += ["", f"All traces: {events / hours:.3f} events/h, {lost / events:.2f} nodes per event. The plan's model "
              f"for 4 nodes in the traced band ({traced_band}): {rate:.3f} events/h, {per_event:.2f} nodes per event.", ""]
    return lines


def report(loso, devout, full, cal) -> str:
    s = summary(loso)
    b = bands(loso, devout)
    inside, total = coverage(loso, devout)
    met = (s["median_abs_error"] <= TARGET_MEDIAN, s["worst_ratio"] <= TARGET_WORST_RATIO,
           inside / total >= TARGET_COVERAGE)
    yes = lambda ok: "yes" if ok else "NO"  # noqa: E731
    lines = ["# Throughput model accuracy", "",
             "Written by `scripts/eval_model.py` (do not edit by hand). Leave-one-source-out: each group of "
             "resembling sources is predicted by a model fitted on all the others, as whole-layout samples/s "
             "(the calibrated compute rate of one rank, `trainctl/perf/compute_rate.py`, through the network model "
             "of the row's cluster). Source groups: " + "; ".join(
                 f"`{g}` ({', '.join(m)})" for g, m in sorted(cal.source_groups.items())) + ".", "",
             "## Summary", "", "| check | result | target | met |", "|---|---|---|---|",
             f"| median absolute error, leave-one-source-out | {s['median_abs_error']:.1%} (bias "
             f"{s['median_error']:+.1%}) | {TARGET_MEDIAN:.0%} | {yes(met[0])} |",
             f"| worst row, either direction | x{s['worst_ratio']:.2f} ({s['worst_row']}) | x{TARGET_WORST_RATIO:g} | "
             f"{yes(met[1])} |",
             f"| published figure inside the plan's band (band made without the row's source group) | "
             f"{inside}/{total} = {inside / total:.0%} | {TARGET_COVERAGE:.0%} | {yes(met[2])} |", "",
             f"Band of a modelled estimate (published/predicted, {BAND_PERCENTILES[0]:g}th-{BAND_PERCENTILES[1]:g}th "
             f"percentile of out-of-source predictions): x{b['seen'][0]:.2f} to x{b['seen'][1]:.2f} where the fit "
             f"has rows of the device and the model family; x{b['unseen'][0]:.2f} to x{b['unseen'][1]:.2f} where it "
             "has not (the cross-device spread: rows whose device was not in the fit, and each device group left "
             "out whole).", "", "Fitted on all rows:", *fit_words(full), ""]
    lines += ["## Leave-one-source-out, by model family, device and stack", ""]
    lines += breakdown(loso, lambda r: r.point.shape.family, "family")
    lines += breakdown(loso, lambda r: r.point.row.device, "device")
    lines += breakdown(loso, lambda r: r.point.row.stack, "stack")
    lines += breakdown(loso, lambda r: r.held_out, "source group")
    lines += breakdown(devout, lambda r: r.held_out, "device group left out whole")
    lines += _row_table(loso, cal) + [""] + _scaling_table(scaling(loso)) + [""] + spot_check()
    return "\n".join(lines).rstrip() + "\n"


def fit_words(f: compute_rate.Fit) -> list[str]:
    def effects(d):
        return ", ".join(f"{k} x{math.exp(v):.2f}" for k, v in sorted(d.items()))
    return [f"- size knee h0 = {f.size_knee:g}; eager attention factor k = {f.attention_factor:g}; CNN memory "
            f"traffic {f.cnn_traffic:g} B per FLOP; synchronous step loss on more than one rank {f.sync_loss:.1%} "
            "(median of published 1-GPU vs n-GPU pairs)",
            f"- die group: {effects(f.groups)}", f"- model family: {effects(f.families)}",
            f"- software stack: {effects(f.stacks)}"]


def _row_table(loso, cal) -> list[str]:
    out = ["## Every row, predicted without its source group", "",
           "| row | device | stack | layout | predicted | published | error | held out |",
           "|---|---|---|---|---|---|---|---|"]
    for r in loso:
        row = r.point.row
        layout = f"{row.nodes}x{row.ranks_per_node} {row.strategy}, batch {row.micro_batch}" + \
            (f"x{row.accumulation}" if row.accumulation > 1 else "")
        out.append(f"| {row.id} | {row.device} | {row.stack} | {layout} | {r.predicted:,.1f} | "
                   f"{row.samples_per_s:,.1f} | {r.error:+.1%} | {r.held_out} |")
    out += ["", "Sources:", ""] + [f"- `{k}`: {v}" for k, v in sorted(cal.sources.items())]
    return out


def _scaling_table(scale) -> list[str]:
    out = ["## Scaling efficiency (per-rank throughput relative to the base layout), out of source", "",
           "| row | base | published | predicted | difference |", "|---|---|---|---|---|"]
    out += [f"| {a} | {b} | {p:.3f} | {q:.3f} | {q - p:+.3f} |" for a, b, p, q in scale]
    return out


def outputs() -> tuple[str, str]:
    catalog, cal = load_catalog(), load_calibration()
    pts = compute_rate.points(catalog, cal)
    loso, devout = leave_source_out(pts, cal), leave_device_group_out(pts, cal)
    full = compute_rate.fit(pts)
    b = bands(loso, devout)
    text = report(loso, devout, full, cal)
    fit_doc = {"generated_by": "scripts/eval_model.py", "calibration_date": cal.date, "fit": full.to_json(),
               "band_percentiles": list(BAND_PERCENTILES),
               "band_seen": {"ratio_low": round(b["seen"][0], 4), "ratio_high": round(b["seen"][1], 4)},
               "band_unseen": {"ratio_low": round(b["unseen"][0], 4), "ratio_high": round(b["unseen"][1], 4)},
               "leave_source_out": summary(loso)}
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
    print(f"leave-one-source-out: median {s['median_abs_error']:.1%}, worst x{s['worst_ratio']:.2f} "
          f"({s['worst_row']}); wrote {REPORT_PATH.relative_to(ROOT)} and {RESIDUALS_PATH.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
