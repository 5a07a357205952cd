"""Follow a job on any platform through its backend's describe() and logs(): status transitions,
every host's lines in time order, throughput from the entrypoint's metric lines, interruptions,
training vs billable seconds, Spot savings and dollars. Polls politely: per cycle one describe and
the backend's bounded log calls, backing off while nothing changes."""
from __future__ import annotations

import re
import statistics
import time
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any, Callable

from trainctl import state
from trainctl.errors import TrainctlError, UsageError
from trainctl.render import table_console

METRIC = re.compile(r"trainctl step=(\d+) loss=(\S+) samples_per_s=([0-9.eE+-]+)")
EXIT_CODES = {"Completed": 0, "Failed": 1, "Stopped": 3}


JOB_ID = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")  # SageMaker's job-name rule; launch makes such ids


def check_job_id(job_id: str) -> str:
    """A job id as launch makes them, or a UsageError (exit 2) before anything is asked of AWS."""
    if len(job_id) > 63 or not JOB_ID.fullmatch(job_id):
        shown = repr(job_id) if len(job_id) <= 70 else repr(job_id[:60]) + "..."
        raise UsageError(f"{shown} is not a job id: 1-63 letters, digits and hyphens, starting and ending with a "
                         "letter or digit, as `trainctl launch` printed it (`trainctl ls` lists them)")
    return job_id


def job_record(job_id: str) -> dict | None:
    check_job_id(job_id)
    if not (state.home() / "state.db").exists():
        return None
    with closing(state.connect()) as conn:
        row = conn.execute("SELECT * FROM jobs WHERE job_id=?", (job_id,)).fetchone()
    return dict(row) if row else None


def locate(job_id: str) -> tuple[str, str, dict | None]:
    """(platform, region, state row): from the state database, else a SageMaker job in the default region."""
    row = job_record(job_id)
    if row:
        return row["platform"], row["region"], row
    from trainctl import aws

    return "sagemaker", aws.default_region(), None


@dataclass
class Progress:
    """What the log lines said so far."""

    rates: list[float] = field(default_factory=list)
    last_step: int | None = None
    last_loss: float | None = None

    def feed(self, message: str) -> bool:
        m = METRIC.search(message)
        if not m:
            return False
        self.last_step, self.last_loss = int(m.group(1)), float(m.group(2))
        self.rates.append(float(m.group(3)))
        return True

    @property
    def samples_per_s(self) -> float | None:
        # The median: the first window after every (re)start carries start-up time, and one slow
        # window must not set the number later plans rely on.
        return round(statistics.median(self.rates), 2) if self.rates else None


def _on_demand_hourly(view, row: dict | None) -> float | None:
    from trainctl.catalog import load_catalog

    price = load_catalog().on_demand_price(view.platform, view.region, view.instance_type or "")
    if price is not None:
        return price.usd_per_hour * (view.count or 1)
    option = _option(row)
    return option.get("hourly_usd") if option.get("market") == "on-demand" else None


def _option(row: dict | None) -> dict:
    import json

    try:
        return json.loads(row["option_json"]) if row and row.get("option_json") else {}
    except ValueError:
        return {}


def total_steps(view) -> int | None:
    hps = (view.raw or {}).get("HyperParameters") or {}
    try:
        return int(str(hps.get("steps", "")).strip('"'))
    except ValueError:
        return None


def summary(view, progress: Progress, row: dict | None, now: float | None = None) -> dict:
    """The `watch --once --output json` document (ARCHITECTURE.md contract, plus extras)."""
    now = time.time() if now is None else now
    option = _option(row)
    training, billable = view.training_seconds, view.billable_seconds
    savings = None
    if view.market == "spot" and training and billable is not None:
        savings = round((1 - billable / training) * 100, 1)  # SageMaker's definition
    od_hourly = _on_demand_hourly(view, row)
    cost = None
    if billable is not None and od_hourly is not None:
        # Managed Spot is billed as billable seconds at the On-Demand rate: the discount is in the seconds.
        cost = round(billable / 3600 * od_hourly, 4)
    elif view.started_at and not view.finished:
        hourly = option.get("hourly_usd") or od_hourly
        if hourly is not None:
            cost = round((now - view.started_at) / 3600 * hourly, 4)
    steps = total_steps(view)
    projected = None
    if view.finished:
        projected = cost
    elif cost is not None and steps and progress.last_step:
        projected = round(cost * steps / progress.last_step, 4)
    elif option.get("expected_cost_usd") is not None:
        projected = option["expected_cost_usd"]
    return {"job_id": view.job_id, "platform": view.platform, "status": view.status,
            "secondary_status": view.secondary_status, "training_seconds": training, "billable_seconds": billable,
            "spot_savings_pct": savings, "cost_usd": cost, "throughput_samples_per_s": progress.samples_per_s,
            "interruptions": view.interruptions, "hosts": list(view.hosts),
            "region": view.region, "instance_type": view.instance_type, "count": view.count, "market": view.market,
            "step": progress.last_step, "steps": steps, "loss": progress.last_loss,
            "projected_cost_usd": projected, "expected_cost_usd": option.get("expected_cost_usd"),
            "failure_reason": view.failure_reason,
            "transitions": [{"status": t.status, "start": t.start, "end": t.end, "message": t.message}
                            for t in view.transitions]}


def record_outcome(view, progress: Progress, row: dict | None) -> str | None:
    """Store the final status and, for a completed job trainctl launched, its measured throughput."""
    if row is None:
        return None
    from trainctl.launch import set_status

    set_status(view.job_id, view.status)
    if view.status == "Completed" and progress.samples_per_s and view.instance_type and row.get("model"):
        state.record_measured(row["model"], int(row["batch_size"]), view.instance_type, int(view.count or 1),
                              progress.samples_per_s, view.job_id)
        return (f"measured {progress.samples_per_s:,.2f} samples/s on {view.count} x {view.instance_type}: "
                f"later plans for {row['model']} at batch {row['batch_size']} use it")
    return None


def read_all(backend, job_id: str, region: str) -> tuple[Any, Progress, list]:
    """One look: describe plus every log line so far (for --once and `logs`)."""
    view = backend.describe(job_id, region)
    progress, lines, cursor = Progress(), [], None
    while True:
        new, cursor = backend.logs(job_id, region, cursor)
        if not new:
            break
        lines += new
        for ln in new:
            progress.feed(ln.message)
    return view, progress, lines


def follow(backend, job_id: str, region: str, *, interval: float = 2.0, max_interval: float | None = None,
           on_transition: Callable[[Any], None] = lambda t: None, on_line: Callable[[Any], None] = lambda ln: None,
           on_update: Callable[[Any, Progress], None] = lambda v, p: None, logs: bool = True,
           should_stop: Callable[[], bool] = lambda: False,
           recover: Callable[[Any], bool] | None = None) -> tuple[Any, Progress]:
    """Poll until the job ends. Backoff: `interval` after a change, growing x1.5 up to `max_interval`
    (default 8 x interval) while nothing happens. `recover` (from `recoverer`) gets every view and
    relaunches lost capacity; it returns True when it did something."""
    max_interval = max_interval or interval * 8
    progress, cursor, shown_transitions = Progress(), None, 0
    delay = interval
    while True:
        view = backend.describe(job_id, region)
        changed = False
        if recover is not None and recover(view):
            view, changed = backend.describe(job_id, region), True
        # the newest transition may still be open; show each once, when it starts
        for t in view.transitions[shown_transitions:]:
            on_transition(t)
            changed = True
        shown_transitions = len(view.transitions)
        # tell the backend what it cannot know by itself: a status change may mean new log streams
        cursor = {**(cursor or {}), "hosts": len(view.hosts), "relist": changed or bool((cursor or {}).get("relist"))}
        if logs:
            while True:  # drain: a burst of lines is read in a few pages, not one page per cycle
                new, cursor = backend.logs(job_id, region, cursor)
                for ln in new:
                    progress.feed(ln.message)
                    on_line(ln)
                changed = changed or bool(new)
                if not new or not view.finished:
                    break
        on_update(view, progress)
        if view.finished or should_stop():
            return view, progress
        delay = interval if changed else min(max_interval, delay * 1.5)
        time.sleep(delay)


def follow_live(backend, job_id: str, region: str, row: dict | None, *, interval: float, logs: bool,
                recover: Callable[[Any], bool] | None, to_stderr: bool) -> tuple[Any, Progress]:
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
            status.update(status_line(summary(view, progress, row)))

    if status:
        status.start()
    try:
        return follow(backend, job_id, region, interval=interval, on_transition=on_transition, on_line=on_line,
                      on_update=on_update, logs=logs, recover=recover)
    finally:
        if status:
            status.stop()


def recoverer(backend, job_id: str, region: str, say: Callable[[str], None]) -> Callable[[Any], bool]:
    """For `watch --recover`: when a job shows Interrupted, relaunch the capacity it lost (the nodes resume
    from the last checkpoint by themselves) and record each interruption, with its cost, once."""
    import json

    if not backend.capabilities.recover:
        raise TrainctlError(f"--recover: {backend.platform} restarts interrupted jobs by itself (managed Spot); "
                            "drop --recover", exit_code=2)
    from trainctl.backends.base import CapacityError

    def recorded_interruptions() -> set[str]:
        if not (state.home() / "state.db").exists():
            return set()
        with closing(state.connect()) as conn:
            rows = conn.execute("SELECT detail FROM events WHERE job_id=? AND kind='interruption'", (job_id,))
            return {json.loads(r["detail"]).get("instance_id") for r in rows}

    def check(view) -> bool:
        if view.finished or view.secondary_status != "Interrupted":
            return False
        try:
            result = backend.recover(job_id, region, progress=say)
        except CapacityError as e:
            say(f"recovery of {job_id} found no capacity yet ({e}); trying again at the next poll")
            return False
        known = recorded_interruptions()
        for item in result.get("interruptions", []):
            if item.get("instance_id") not in known:
                state.add_event(job_id, "interruption", json.dumps(item))
        if result.get("launched"):
            state.add_event(job_id, "recovered", json.dumps({k: result.get(k) for k in
                                                             ("launched", "availability_zone", "moved", "missing")}))
            return True
        return False

    return check


def exit_code(view) -> int:
    return EXIT_CODES.get(view.status, 0)


def fmt_time(epoch: float | None) -> str:
    if epoch is None:
        return "--:--:--"
    return time.strftime("%H:%M:%S", time.localtime(epoch))


def check_host(view, host: int | None) -> str | None:
    if host is None:
        return None
    if not 1 <= host <= len(view.hosts):
        raise TrainctlError(f"--host {host}: {view.job_id} has hosts 1..{len(view.hosts)}", exit_code=2)
    return view.hosts[host - 1]


# ----------------------------------------------------------------------------- rendering for people
def _money(x: float | None) -> str:
    return "-" if x is None else f"${x:,.2f}"


def status_line(doc: dict) -> str:
    step = f"step {doc['step']}/{doc['steps'] or '?'}" if doc.get("step") is not None else "no steps yet"
    rate = doc.get("throughput_samples_per_s")
    return (f"{doc['status']}/{doc.get('secondary_status') or '-'}  {step}  "
            f"{'-' if rate is None else f'{rate:,.1f}'} samples/s  interruptions {doc['interruptions']}  "
            f"{_money(doc.get('cost_usd'))} so far, {_money(doc.get('projected_cost_usd'))} projected")


def list_jobs(limit: int, live: bool = True) -> list[dict]:
    """The newest jobs from the state database, each with its live status unless `live` is false."""
    import json
    from contextlib import closing

    from trainctl import state
    from trainctl.backends import get_backend

    rows = []
    if (state.home() / "state.db").exists():
        with closing(state.connect()) as conn:
            rows = [dict(r) for r in conn.execute("SELECT * FROM jobs ORDER BY created_at DESC LIMIT ?", (limit,))]
    out = []
    for r in rows:
        opt = json.loads(r["option_json"])
        status, secondary = r["status"], None
        if live and r["status"] not in ("SubmitFailed",):
            try:
                v = get_backend(r["platform"]).describe(r["job_id"], r["region"])
                status, secondary = v.status, v.secondary_status
            except Exception as e:  # noqa: BLE001 - one unreachable job must not hide the others
                from trainctl.aws import error_summary

                status = f"unknown ({error_summary(e)})"
        out.append({"job_id": r["job_id"], "platform": r["platform"], "region": r["region"],
                    "layout": f"{opt.get('count')}x {opt.get('instance_type')}", "market": opt.get("market"),
                    "status": status, "secondary_status": secondary, "recorded_status": r["status"],
                    "expected_cost_usd": r["expected_cost_usd"], "created_at": r["created_at"],
                    "spec": r["spec_path"]})
    return out


def render_summary(doc: dict) -> None:
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
    for k, v in rows:
        t.add_row(k, v)
    con.print(t)


def render_jobs(jobs: list[dict]) -> None:
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
