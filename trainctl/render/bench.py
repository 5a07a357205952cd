"""`trainctl bench` for people: one row per layout (predicted samples/s, its band, the measured figure, dollars
spent or the dollar bound of a dry run), then the top choice before and after, and whether it changed."""
from __future__ import annotations

from trainctl.render import table_console
from trainctl.render.columns import Column


def _rate(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def _band(row: dict) -> str:
    return "-" if not row.get("band") else f"{row['band'][0]:,.0f}-{row['band'][1]:,.0f}"


def _dollars(row: dict) -> str:
    if "spent_usd" in row:
        return "-" if row["spent_usd"] is None else f"${row['spent_usd']:,.4f}"
    return f"<= ${row['bound_usd']:,.2f}"


SKIPPED_SHOWN = 5   # layouts not measured, one line each; the JSON document has them all

# Most important first: at a narrow terminal the last columns are left out whole (and named).
_COLUMNS = (
    Column("layout", lambda r: r["layout"], keep=True),
    Column("platform", lambda r: r["platform"]),
    Column("predicted", lambda r: _rate(r["predicted_samples_per_s"]), "right"),
    Column("band", _band, "right"),
    Column("measured", lambda r: _rate(r.get("measured_samples_per_s")), "right"),
    Column("$", _dollars, "right"),
    Column("regime", lambda r: r.get("regime") or "-"),
    Column("job", lambda r: r.get("job_id") or "-"),
)


def confirm(question: str) -> bool:
    """Ask before the bench spends; without a terminal to ask on, refuse in one line (as `launch` does)."""
    import sys

    import typer

    from trainctl.errors import UsageError

    if not sys.stdin.isatty():
        raise UsageError(f"not benched: no terminal to ask \"{question}\"; add --yes (or --dry-run to only look)")
    return typer.confirm(question, default=False, err=True)


# The network regime a measurement saw (usecases/bench/record.py), in words for the footnote.
REGIMES = {"none": "none: one node, no network between nodes to measure",
           "sustained": "sustained: the type's bandwidth has no burst",
           "burst": "burst: an \"up to\" type measured on its fresh burst credits (a long job will see less)",
           "unknown": "unknown: an \"up to\" type measured past its burst credits"}


def _footnote(rows: list[dict], width: int) -> str:
    """What the columns shown at this width mean: a column left out (a narrow terminal) is not explained."""
    from trainctl.render.columns import shown_headers

    shown = shown_headers(_COLUMNS, rows, width)
    words = ["samples/s of the whole layout"]
    if "band" in shown:
        words.append("band: the model's out-of-source band")
    seen = [REGIMES[r] for r in dict.fromkeys(row.get("regime") for row in rows) if r in REGIMES]
    if seen and "regime" in shown:
        words.append(f"regime {'; '.join(seen)}")
    return "; ".join(words)


def bench_table(doc: dict) -> None:
    from trainctl.render.columns import fitted_table

    con = table_console(100)
    if doc["layouts"]:
        con.print(fitted_table(_COLUMNS, doc["layouts"], con.width))
        con.print(_footnote(doc["layouts"], con.width), style="dim", markup=False)
    notes: dict[str, list[str]] = {}   # each message once, with every layout it concerns
    for row in doc["layouts"]:
        if row.get("note"):
            notes.setdefault(row["note"], []).append(row["layout"])
    for note, layouts in notes.items():
        con.print(f"{', '.join(layouts)}: {note}", markup=False, soft_wrap=False)
    for skipped in doc["not_measured"][:SKIPPED_SHOWN]:
        con.print(f"not measured {skipped['layout']}: {skipped['why']}", markup=False)
    if len(doc["not_measured"]) > SKIPPED_SHOWN:
        con.print(f"... and {len(doc['not_measured']) - SKIPPED_SHOWN} more layouts not measured (-o json lists "
                  "them with why)", markup=False)
    con.print(f"cap: {doc['cap_rule']}; bound of the layouts measured: ${doc['bound_usd']:,.2f}", markup=False)
    if doc.get("dry_run"):
        if doc["layouts"]:
            first = doc["layouts"][0]
            con.print(f"each job: {first['warmup_steps']} warm-up + {first['steps']} measured steps, stopped at "
                      f"{first['max_minutes']:g} min at the latest, then taken down", markup=False)
        con.print("dry run: nothing launched", markup=False)
        return
    if doc.get("spent_unknown_jobs"):
        jobs = ", ".join(doc["spent_unknown_jobs"])
        con.print(f"spent: at least ${doc.get('spent_at_least_usd') or 0:,.4f}; not known for {jobs} (trainctl "
                  f"stopped following it; `trainctl cost {doc['spent_unknown_jobs'][0]}` shows its dollars)",
                  markup=False)
    elif "spent_usd" in doc:
        con.print(f"spent: ${doc['spent_usd']:,.4f}", markup=False)
    con.print(f"top before: {doc['top_before']}", markup=False)
    con.print(f"top after:  {doc['top_after']}", markup=False)
    con.print("the top choice changed" if doc.get("changed") else "the top choice did not change", markup=False)
