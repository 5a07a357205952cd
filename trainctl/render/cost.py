"""`trainctl cost` for people: one row per job (or per group), the total, and where the billed figure comes
from (80 columns and up: the least important columns are left out whole at a narrow terminal)."""
from __future__ import annotations

from trainctl.render import table_console
from trainctl.render.columns import Column


def _usd(x: float | None) -> str:
    return "-" if x is None else f"${x:,.2f}" if x >= 0.01 or x == 0 else f"${x:.4f}"


def _error(row: dict) -> str:
    return "-" if row.get("error") is None else f"{row['error']:+.0%}"


_DOLLARS = (
    Column("predicted", lambda r: _usd(r["predicted_usd"]), "right"),
    Column("running", lambda r: _usd(r["running_usd"]), "right"),
    Column("billed", lambda r: _usd(r["billed_usd"]), "right"),
    Column("p90", lambda r: _usd(r["predicted_p90_usd"]), "right"),
)
_JOB_COLUMNS = (Column("job", lambda r: r["job_id"], keep=True), *_DOLLARS,
                Column("status", lambda r: r["status"] or "-"), Column("spec", lambda r: r["spec"] or "-"),
                Column("layout", lambda r: r["layout"] or "-"), Column("day", lambda r: r["day"]))
_GROUP_COLUMNS = (Column("{by}", lambda r: r["key"], keep=True), Column("jobs", lambda r: str(r["jobs"]), "right"),
                  *_DOLLARS)


def cost_table(doc: dict) -> None:
    from trainctl.render.columns import fitted_table

    con = table_console(100)
    if not doc["jobs"]:
        con.print("no jobs match (`trainctl ls` lists the jobs trainctl launched)", markup=False)
        return
    if doc["group_by"] == "job":
        columns = _JOB_COLUMNS + ((Column("error", _error, "right"),) if "compare" in doc else ())
        con.print(fitted_table(columns, doc["jobs"], con.width))
    else:
        by = Column(doc["group_by"], _GROUP_COLUMNS[0].cell, keep=True)
        con.print(fitted_table((by,) + _GROUP_COLUMNS[1:], doc["groups"], con.width))
    for line in market_lines(doc["jobs"]):
        con.print(line, markup=False)
    t = doc["total"]
    con.print(f"total: predicted {_usd(t['predicted_usd'])} (p90 {_usd(t['predicted_p90_usd'])}), running "
              f"{_usd(t['running_usd'])}, billed {_usd(t['billed_usd'])}"
              + (" (estimated)" if doc["billed_estimated"] else ""), markup=False)
    con.print(doc["billed_note"], style="dim", markup=False)
    if "compare" in doc:
        con.print(compare_line(doc["compare"]), markup=False)


_MARKETS = {"spot": "Spot", "on-demand": "On-Demand"}


def market_lines(rows: list[dict]) -> list[str]:
    """A Spot and an On-Demand line for each job that ran on both markets (an EC2 job whose replacements were
    bought On-Demand): the running dollars of each."""
    out = []
    for r in rows:
        markets = r.get("running_by_market_usd") or {}
        if len(markets) > 1:
            out += [f"{r['job_id']}: {_MARKETS.get(key, key)} {_usd(usd)}" for key, usd in sorted(markets.items())
                    if key in _MARKETS] + [f"{r['job_id']}: {key} {_usd(usd)}" for key, usd in sorted(markets.items())
                                           if key not in _MARKETS]
    return out


def compare_line(c: dict) -> str:
    if not c["compared"]:
        return "predicted vs billed: no job has a billed figure yet"
    return (f"predicted vs billed over {c['compared']} job{'s' if c['compared'] != 1 else ''}: median error "
            f"{c['median_error']:+.0%}, median |error| {c['median_abs_error']:.0%} (+ = the plan expected more "
            f"than was billed), worst {c['worst_job']}")
