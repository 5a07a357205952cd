"""A job for people: the live view of `watch` (transitions, every host's lines, a status line), its summary
table, and the job list of `ls`."""
from __future__ import annotations

import time

from trainctl.render import table_console
from trainctl.render.columns import Column, fitted_table
from trainctl.text.logfold import TracebackFolder
from trainctl.text.safe import clean, plain


class LiveView:
    """The live view of `watch` for people: transitions and every host's lines as they come, a status line on a
    terminal. With JSON output it goes to stderr so stdout stays one document. It only renders: the CLI
    (cli/watch.py) follows the job and feeds it. Used as a context manager: the status line starts and stops."""

    def __init__(self, job_id: str, to_stderr: bool):
        from rich.console import Console

        self.con = Console(highlight=False, stderr=to_stderr)
        self.folder = TracebackFolder(job_id, self._show_line)  # a traceback is one line here; `logs` has it whole
        self.status = self.con.status("waiting for the job", spinner="dots") if self.con.is_terminal else None

    def transition(self, t) -> None:
        from rich.text import Text

        style = "bold red" if t.status in ("Interrupted", "Failed", "MaxWaitTimeExceeded") else "bold"
        self.con.print(Text.assemble(f"{fmt_time(t.start)} ", plain(t.status, True, style), " ",
                                     plain(t.message)), soft_wrap=True)

    def line(self, ln) -> None:
        self.folder.feed(ln)

    def _show_line(self, ln) -> None:
        from rich.text import Text

        # log text is the job's: no control sequences, never markup, never re-wrapped (copy-paste must work)
        self.con.print(Text.assemble(f"{fmt_time(ln.timestamp_ms / 1000)} ", plain(ln.host, True, "cyan"), " ",
                                     plain(ln.message)), soft_wrap=True)

    def note(self, message: str) -> None:
        from rich.text import Text

        self.con.print(Text(message), soft_wrap=True)

    @property
    def shows_status(self) -> bool:
        return self.status is not None

    def update(self, doc: dict) -> None:
        """The status line from watch's summary document of the job now."""
        if self.status:
            self.status.update(status_line(doc, self.con.width - 4))  # 4: the spinner

    def __enter__(self) -> "LiveView":
        if self.status:
            self.status.start()
        return self

    def __exit__(self, *exc) -> None:
        self.folder.flush()
        if self.status:
            self.status.stop()


def interrupted_hint(view) -> str:
    lost = view.count - len(view.hosts) if view.count else None
    nodes = f"{lost} Spot node{'s' if lost != 1 else ''}" if lost else "Spot nodes"
    return (f"{view.job_id} lost {nodes} to a Spot reclaim and waits for a replacement, which its surviving nodes "
            f"launch themselves; `trainctl watch {view.job_id} --recover` relaunches it (same AZ first) now and the "
            f"job resumes from its last checkpoint; `trainctl stop {view.job_id}` ends it")


def fmt_time(epoch: float | None) -> str:
    if epoch is None:
        return "--:--:--"
    return time.strftime("%H:%M:%S", time.localtime(epoch))


def _money(x: float | None) -> str:
    # a sandbox job (or the first minutes of a real one) costs cents: "$0.00" beside a saving would say nothing
    if x is None:
        return "-"
    return f"${x:,.4f}" if 0 < abs(x) < 1 else f"${x:,.2f}"


def status_line(doc: dict, width: int | None = None) -> str:
    """The live status line; at a narrow width its least important parts are left out (never cut)."""
    step = f"step {doc['step']}/{doc['steps'] or '?'}" if doc.get("step") is not None else "no steps yet"
    rate = doc.get("throughput_samples_per_s")
    parts = [f"{doc['status']}/{doc.get('secondary_status') or '-'}", step,
             f"{_money(doc.get('cost_usd'))} so far", f"{'-' if rate is None else f'{rate:,.1f}'} samples/s",
             f"interruptions {doc['interruptions']}", f"{_money(doc.get('projected_cost_usd'))} projected"]
    while width and len(parts) > 1 and len("  ".join(parts)) > width:
        parts.pop()
    return "  ".join(parts)


def summary_table(doc: dict) -> None:
    from rich.table import Table

    con = table_console()
    t = Table(show_header=False, pad_edge=False, box=None)
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")  # a value wraps (an id folds) at a narrow width, never ends in an ellipsis
    savings = doc.get("spot_savings_pct")
    rows = [("job", f"{doc['job_id']} ({doc['platform']}, {doc.get('region')})"),
            ("layout", f"{doc.get('count')} x {doc.get('instance_type')} {doc.get('market')}"),
            ("status", f"{doc['status']} / {doc.get('secondary_status') or '-'}"),
            ("hosts", ", ".join(doc["hosts"])),
            ("progress", f"step {doc.get('step') if doc.get('step') is not None else '-'} of "
                         f"{doc.get('steps') or '?'}, loss {doc.get('loss') if doc.get('loss') is not None else '-'}"),
            ("throughput", "-" if doc.get("throughput_samples_per_s") is None
             else f"{doc['throughput_samples_per_s']:,.2f} samples/s (median of the metric lines)"),
            ("interruptions", str(doc["interruptions"]) + "".join(
                f"; replaced by {', '.join(r.get('instance_ids') or [])} ({r.get('market')})"
                for r in doc.get("replacements") or [])),
            ("training / billable", f"{doc.get('training_seconds') if doc.get('training_seconds') is not None else '-'}"
                                    f" s / {doc.get('billable_seconds') if doc.get('billable_seconds') is not None else '-'} s"),
            ("Spot savings", "-" if savings is None else f"{savings:.1f}% ({doc.get('spot_savings_basis') or '1 - billable/training'})"),
            ("cost", f"{_money(doc.get('cost_usd'))} so far, {_money(doc.get('projected_cost_usd'))} projected "
                     f"(plan expected {_money(doc.get('expected_cost_usd'))})")]
    if doc.get("failure_reason"):
        rows.append(("failure", doc["failure_reason"]))
    if doc.get("never_checked_in"):
        rows.append(("never checked in", doc["never_checked_in"]))
    for k, v in rows:  # values come from AWS and the job: plain text, never markup
        t.add_row(k, plain(v))
    con.print(t)


def _status_of(j: dict) -> str:  # AWS's words: no control sequences
    return clean(j["status"], True) + (f"/{clean(j['secondary_status'], True)}" if j.get("secondary_status") else "")


_RECLAIMS = "reclaimed/replaced"
# `ls`'s columns, most important first: the job id (which the user copies into watch, logs, stop, down) is
# never cut; at a narrow width the last columns are left out whole.
_JOB_COLUMNS = (
    Column("job", lambda j: j["job_id"], keep=True),
    Column("status", _status_of, wrap=True),
    Column("layout", lambda j: j["layout"]),
    Column("market", lambda j: j["market"] or "-"),
    Column("expected $", lambda j: _money(j["expected_cost_usd"]), "right"),
    Column("$ so far", lambda j: _money(j.get("cost_usd")), "right"),
    # Spot reclaims and the nodes that replaced them (the survivors' own, or `watch --recover`'s)
    Column(_RECLAIMS, lambda j: "-" if j.get("interruptions") is None else
           f"{j['interruptions']}/{j.get('replacements') or 0}", "right"),
    Column("by", lambda j: (j.get("launched_by") or "-").rsplit("/", 1)[-1]),
    Column("platform", lambda j: j["platform"]),
    Column("region", lambda j: j["region"] or "-"),
    Column("launched", lambda j: time.strftime("%Y-%m-%d %H:%M", time.localtime(j["created_at"])) if j["created_at"] else "-"),
)


def jobs_table(jobs: list[dict]) -> None:
    con = table_console(150)
    if not jobs:
        con.print("no jobs yet: `trainctl launch SPEC` starts one")
        return
    # the reclaims column only when a job was reclaimed: a column of dashes would push a useful one out
    columns = [c for c in _JOB_COLUMNS if c.header != _RECLAIMS or any(j.get("interruptions") for j in jobs)]
    con.print(fitted_table(columns, jobs, con.width))


def say(message: str) -> None:
    from trainctl.render import stderr_console

    stderr_console().print(clean(message), markup=False, soft_wrap=True)  # notes may quote keys and records


def log_line(ln, with_host: bool) -> str:
    """A log line for `logs` (printed as it is, so cleaned of control sequences here)."""
    text = f"{clean(ln.host, True)} {clean(ln.message)}" if with_host else clean(ln.message)
    return f"{fmt_time(ln.timestamp_ms / 1000)} {text}"


def removed_lines(job_id: str, region: str, removed: list[str]) -> None:
    """`down` for people: each removed resource on stdout, the tally on stderr."""
    for line in removed:
        print(f"removed {line}")
    from trainctl.text.wrap import count

    say(f"{job_id}: {count(len(removed), 'resource')} removed" if removed
        else f"{job_id}: nothing tagged trainctl:job={job_id} is left in {region}")
