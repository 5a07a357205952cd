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
    from trainctl.usecases.calibration import summary_line

    con = table_console(100)
    if doc["jobs"]:
        several = len({j["account"] for j in doc["jobs"]}) > 1
        con.print(fitted_table(_COLUMNS + ((_ACCOUNT,) if several else ()), doc["jobs"], con.width))
        con.print("samples/s of the whole layout; error = predicted / measured - 1", style="dim")
    con.print(summary_line(doc), markup=False, soft_wrap=False)
