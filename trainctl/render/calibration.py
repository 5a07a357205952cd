"""`trainctl calibration` for people: one row per completed job, then the summary line (80 columns and up)."""
from __future__ import annotations

from trainctl.render import table_console
from trainctl.render.columns import Column


def _rate(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def _error(j: dict) -> str:
    return "-" if j["error"] is None else f"{j['error']:+.0%}"


# Most important first: at a narrow terminal the last columns are left out whole (and named), and the job id,
# which a user copies into `watch` or `logs`, is never folded.
_COLUMNS = (
    Column("job", lambda j: j["job_id"], keep=True),
    Column("layout", lambda j: j["layout"] or "-"),
    Column("error", _error, "right"),
    Column("predicted", lambda j: _rate(j["predicted_samples_per_s"]), "right"),
    Column("measured", lambda j: _rate(j["measured_samples_per_s"]), "right"),
    Column("source", lambda j: j["throughput_source"] or "-"),
    Column("by", lambda j: j.get("measured_by") or "job"),
)
_ACCOUNT = Column("account", lambda j: j["account"] or "-")


def calibration_table(doc: dict) -> None:
    from trainctl.render.columns import fitted_table
    con = table_console(100)
    if doc["jobs"]:
        several = len({j["account"] for j in doc["jobs"]}) > 1
        con.print(fitted_table(_COLUMNS + ((_ACCOUNT,) if several else ()), doc["jobs"], con.width))
        con.print("samples/s of the whole layout; error = predicted / measured - 1", style="dim")
    con.print(summary_line(doc), markup=False, soft_wrap=False)


def summary_line(doc: dict) -> str:
    s = doc["summary"]
    where = "AWS" if doc["endpoint"] == "aws" else doc["endpoint"]
    head = f"{s['completed_jobs']} completed job{'s' if s['completed_jobs'] != 1 else ''} on {where}"
    if doc["account"]:
        head += f", account {doc['account']}"
    if not s["compared"]:
        return head + ": none with a measured throughput yet (`trainctl watch JOB` records it when a job completes)"
    band = ""
    if s["within_band"] is not None:
        banded = sum(1 for j in doc["jobs"] if j["error"] is not None and j["band"])
        band = f"; {s['within_band']} of {banded} inside the plan's throughput band"
    return (f"{head}, {s['compared']} compared: median |error| {s['median_abs_error']:.0%}, median error "
            f"{s['median_error']:+.0%} (+ = the plan expected more than was measured), worst "
            f"{s['worst_abs_error']:.0%} ({s['worst_job']}){band}")
