"""`trainctl calibration` for people: one row per completed job, then the summary line (80 columns and up)."""
from __future__ import annotations

from trainctl.render import table_console


def _rate(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def calibration_table(doc: dict) -> None:
    from rich.table import Table

    from trainctl.usecases.calibration import summary_line

    con = table_console(100)
    if doc["jobs"]:
        t = Table(header_style="bold", pad_edge=False, box=None)
        # The job id may fold onto two lines at 80 columns; the figures never do.
        t.add_column("job", overflow="fold", ratio=1)
        for col in ("layout", "source", "predicted", "measured", "error"):
            t.add_column(col, no_wrap=True, justify="left" if col in ("layout", "source") else "right")
        wide = con.width >= 100 and len({j["account"] for j in doc["jobs"]}) > 1
        if wide:
            t.add_column("account", no_wrap=True)
        for j in doc["jobs"]:
            err = "-" if j["error"] is None else f"{j['error']:+.0%}"
            cells = [j["job_id"], j["layout"] or "-", j["throughput_source"] or "-",
                     _rate(j["predicted_samples_per_s"]), _rate(j["measured_samples_per_s"]), err]
            t.add_row(*cells, *([j["account"] or "-"] if wide else []))
        con.print(t)
        con.print("samples/s of the whole layout; error = predicted / measured - 1", style="dim")
    con.print(summary_line(doc), markup=False, soft_wrap=False)
