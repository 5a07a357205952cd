"""A job for people: the live view of `watch` (transitions, every host's lines, a status line), its summary
table, and the job list of `ls`."""
from __future__ import annotations

import time
from typing import Any, Callable

from trainctl.render import table_console
from trainctl.watch import JobRef, Progress, follow, summary


def follow_live(backend, job: JobRef, *, interval: float, logs: bool, recover: Callable[[Any], bool] | None,
                to_stderr: bool) -> tuple[Any, Progress]:
    """`follow` for people: transitions and every host's lines as they come, a status line on a terminal.
    With JSON output the live view goes to stderr so stdout stays one document."""
    from rich.console import Console
    from rich.markup import escape

    con = Console(highlight=False, stderr=to_stderr)

    def on_transition(t) -> None:
        style = "bold red" if t.status in ("Interrupted", "Failed", "MaxWaitTimeExceeded") else "bold"
        con.print(f"{fmt_time(t.start)} [{style}]{t.status}[/] {escape(t.message)}", soft_wrap=True)

    def on_line(ln) -> None:
        # log text is the job's, not markup: escaped, and never re-wrapped (copy-paste must work)
        con.print(f"{fmt_time(ln.timestamp_ms / 1000)} [cyan]{ln.host}[/] {escape(ln.message)}", soft_wrap=True)

    status = con.status("waiting for the job", spinner="dots") if con.is_terminal else None

    def on_update(view, progress) -> None:
        if status:
            status.update(status_line(summary(view, progress, job.record)))

    if status:
        status.start()
    try:
        return follow(backend, job.job_id, job.region, interval=interval, on_transition=on_transition, on_line=on_line,
                      on_update=on_update, logs=logs, recover=recover)
    finally:
        if status:
            status.stop()


def fmt_time(epoch: float | None) -> str:
    if epoch is None:
        return "--:--:--"
    return time.strftime("%H:%M:%S", time.localtime(epoch))


def _money(x: float | None) -> str:
    return "-" if x is None else f"${x:,.2f}"


def status_line(doc: dict) -> str:
    step = f"step {doc['step']}/{doc['steps'] or '?'}" if doc.get("step") is not None else "no steps yet"
    rate = doc.get("throughput_samples_per_s")
    return (f"{doc['status']}/{doc.get('secondary_status') or '-'}  {step}  "
            f"{'-' if rate is None else f'{rate:,.1f}'} samples/s  interruptions {doc['interruptions']}  "
            f"{_money(doc.get('cost_usd'))} so far, {_money(doc.get('projected_cost_usd'))} projected")


def summary_table(doc: dict) -> None:
    from rich.table import Table

    con = table_console()
    t = Table(show_header=False, pad_edge=False, box=None)
    t.add_column(style="bold")
    t.add_column()
    savings = doc.get("spot_savings_pct")
    rows = [("job", f"{doc['job_id']} ({doc['platform']}, {doc.get('region')})"),
            ("layout", f"{doc.get('count')} x {doc.get('instance_type')} {doc.get('market')}"),
            ("status", f"{doc['status']} / {doc.get('secondary_status') or '-'}"),
            ("hosts", ", ".join(doc["hosts"])),
            ("progress", f"step {doc.get('step') if doc.get('step') is not None else '-'} of "
                         f"{doc.get('steps') or '?'}, loss {doc.get('loss') if doc.get('loss') is not None else '-'}"),
            ("throughput", "-" if doc.get("throughput_samples_per_s") is None
             else f"{doc['throughput_samples_per_s']:,.2f} samples/s (median of the metric lines)"),
            ("interruptions", str(doc["interruptions"])),
            ("training / billable", f"{doc.get('training_seconds') if doc.get('training_seconds') is not None else '-'}"
                                    f" s / {doc.get('billable_seconds') if doc.get('billable_seconds') is not None else '-'} s"),
            ("Spot savings", "-" if savings is None else f"{savings:.1f}% (1 - billable/training)"),
            ("cost", f"{_money(doc.get('cost_usd'))} so far, {_money(doc.get('projected_cost_usd'))} projected "
                     f"(plan expected {_money(doc.get('expected_cost_usd'))})")]
    if doc.get("failure_reason"):
        rows.append(("failure", doc["failure_reason"]))
    if doc.get("never_checked_in"):
        rows.append(("never checked in", doc["never_checked_in"]))
    for k, v in rows:
        t.add_row(k, v)
    con.print(t)


def jobs_table(jobs: list[dict]) -> None:
    from rich.table import Table

    con = table_console(150)
    if not jobs:
        con.print("no jobs yet: `trainctl launch SPEC` starts one")
        return
    t = Table(header_style="bold", pad_edge=False)
    for col in ("job", "platform", "region", "layout", "market", "status", "expected $", "launched"):
        t.add_column(col, no_wrap=True)
    for j in jobs:
        status = j["status"] + (f"/{j['secondary_status']}" if j.get("secondary_status") else "")
        t.add_row(j["job_id"], j["platform"], j["region"] or "-", j["layout"], j["market"] or "-", status,
                  _money(j["expected_cost_usd"]), time.strftime("%Y-%m-%d %H:%M", time.localtime(j["created_at"])))
    con.print(t)


def say(message: str) -> None:
    from trainctl.render import stderr_console

    stderr_console().print(message, markup=False, soft_wrap=True)


def log_line(ln, with_host: bool) -> str:
    return f"{fmt_time(ln.timestamp_ms / 1000)} " + (f"{ln.host} {ln.message}" if with_host else ln.message)


def removed_lines(job_id: str, region: str, removed: list[str]) -> None:
    """`down` for people: each removed resource on stdout, the tally on stderr."""
    for line in removed:
        print(f"removed {line}")
    say(f"{job_id}: {len(removed)} resources removed" if removed
        else f"{job_id}: nothing tagged trainctl:job={job_id} is left in {region}")
