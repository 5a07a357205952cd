"""Follow a job on any platform through its backend's describe() and logs(): status transitions,
every host's lines in time order, throughput from the entrypoint's metric lines, interruptions,
training vs billable seconds, Spot savings and dollars. Polls politely: per cycle one describe and
the backend's bounded log calls, backing off while nothing changes."""
from __future__ import annotations

import math
import re
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from trainctl.usecases.calibration import record_comparison
from trainctl.errors import TrainctlError, UsageError
from trainctl.naming.tags import JOB_TAG
from trainctl.plans import Option
from trainctl.state.documents import DamagedRecord, UnknownFormat
from trainctl.state.job_store import JobRow, JobStore
from trainctl.state.sync import finished, from_account
from trainctl.usecases.jobs.transient import patiently

METRIC = re.compile(r"trainctl step=(\d+) loss=(\S+) samples_per_s=([0-9.eE+-]+)")
# Optional on the metric line: the run's total optimizer steps, for a script whose arguments do not say it.
TOTAL_STEPS = re.compile(r"\btotal_steps=(\d+)")
METRIC_FORMAT = "trainctl step=N loss=X samples_per_s=Y [total_steps=M]"
# A measured throughput above this is no measurement (the spec bounds a given throughput the same way): it
# would enter later plans as the job's rate.
MAX_SAMPLES_PER_S = 1e9
# How long a running job may print without a metric line before `watch` says so.
SILENT_SECONDS = 120
EXIT_CODES = {"Completed": 0, "Failed": 1, "Stopped": 3}


JOB_ID = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")  # SageMaker's job-name rule; launch makes such ids


def check_job_id(job_id: str) -> str:
    """A job id as launch makes them, or a UsageError (exit 2) before anything is asked of AWS."""
    if len(job_id) > 63 or not JOB_ID.fullmatch(job_id):
        shown = repr(job_id) if len(job_id) <= 70 else repr(job_id[:60]) + "..."
        raise UsageError(f"{shown} is not a job id: 1-63 letters, digits and hyphens, starting and ending with a "
                         "letter or digit, as `trainctl launch` printed it (`trainctl ls` lists them)")
    return job_id


@dataclass(frozen=True)
class JobRef:
    """Where a job runs, and trainctl's record of it (None for a job trainctl did not launch here)."""

    job_id: str
    platform: str
    region: str
    record: JobRow | None


def _warn(message: str) -> None:
    import sys

    from trainctl.text.safe import clean

    sys.stderr.write(clean(message, one_line=True) + "\n")


def locate(store: JobStore, job_id: str, platform: str | None = None) -> JobRef:
    """The job as the store knows it. A job it does not know is only looked for on AWS when the user names its
    platform (and region): `watch`, `logs`, `stop` and `down` all give the same one-line answer otherwise."""
    from trainctl.aws import clients as aws

    from trainctl.state.job_store import BrokenStore

    check_job_id(job_id)
    broken = False
    try:
        record = store.job(job_id)
    except BrokenStore:
        if platform is None:
            raise
        record, broken = None, True  # the user named the platform: AWS alone answers
    from trainctl.backends import check_platform

    check_platform(platform)
    if record is not None:  # --platform decides over a record (which a colleague's hand may have written)
        return JobRef(job_id, platform or record.platform, record.region or aws.default_region(), record)
    region = aws.default_region()
    try:
        record = from_account(store, job_id, region)  # launched elsewhere: its record in the account's bucket
    except (UnknownFormat, DamagedRecord) as e:
        if platform is None:
            raise
        # --platform given: a record no trainctl can read (a newer format, not JSON, another job's body) must not
        # block `stop`/`down` on every other machine; the resources tagged with the job decide
        _warn(f"warning: {e}; --platform {platform} given: what AWS holds tagged {JOB_TAG}={job_id} decides")
        record = None
    if record is not None:  # (a broken store cannot keep it: the record then only says where the job runs)
        return JobRef(job_id, platform or record.platform, record.region or region, None if broken else record)
    from trainctl.backends import BACKENDS, check_platform

    if platform is None:
        where = f"the endpoint {store.endpoint}" if store.endpoint else "AWS"
        raise UsageError(f"{job_id}: no job of that id in trainctl's records for {where}, here or in the account's "
                         f"job bucket (region asked: {region}); "
                         "`trainctl ls --all` lists the account's jobs, or name a job launched otherwise with "
                         f"--platform {'|'.join(BACKENDS)} and --region")
    return JobRef(job_id, check_platform(platform), region, None)


@dataclass
class Progress:
    """What the log lines said so far."""

    rates: list[float] = field(default_factory=list)
    last_step: int | None = None
    last_loss: float | None = None
    total_steps: int | None = None
    lines: int = 0
    malformed: int = 0            # metric lines skipped: a value that is not a number, or not a sane one

    def feed(self, message: str) -> bool:
        self.lines += 1
        m = METRIC.search(message)
        if not m:
            return False
        try:  # a script may print `loss=tensor(2.3)` or `samples_per_s=1e999`: skipped and counted, never fatal
            step, loss, rate = int(m.group(1)), float(m.group(2)), float(m.group(3))
        except ValueError:
            step, loss, rate = 0, 0.0, math.nan
        if not (math.isfinite(rate) and 0 < rate <= MAX_SAMPLES_PER_S):
            self.malformed += 1
            return False
        self.last_step, self.last_loss = step, loss
        self.rates.append(rate)
        total = TOTAL_STEPS.search(message, m.end())
        if total:
            self.total_steps = int(total.group(1))
        return True

    @property
    def samples_per_s(self) -> float | None:
        # The median: the first window after every (re)start carries start-up time, and one slow
        # window must not set the number later plans rely on.
        return round(statistics.median(self.rates), 2) if self.rates else None


def _on_demand_hourly(view, option: Option | None) -> float | None:
    from trainctl.catalog import load_catalog

    price = load_catalog().on_demand_price(view.platform, view.region, view.instance_type or "")
    if price is not None:
        return price.usd_per_hour * (view.count or 1)
    return option.hourly_usd if option is not None and option.market == "on-demand" else None


def total_steps(view) -> int | None:
    hps = (view.raw or {}).get("HyperParameters") or {}
    try:
        return int(str(hps.get("steps", "")).strip('"'))
    except ValueError:
        return None


def _spot_savings(view) -> tuple[float | None, str | None]:
    """(percent saved, what it is measured against). EC2 bills instances: the saving is against the On-Demand
    price of the same instance-hours. SageMaker reports billable seconds: 1 - billable/training, its definition."""
    if view.market != "spot":
        return None, None
    spent = (view.raw or {}).get("cost_usd")
    if view.on_demand_usd and spent is not None:
        return round((1 - float(spent) / view.on_demand_usd) * 100, 1), "vs On-Demand for the same instance-hours"
    if view.training_seconds and view.billable_seconds is not None:
        return round((1 - view.billable_seconds / view.training_seconds) * 100, 1), "1 - billable/training"
    return None, None


def _warnings(view, progress: Progress) -> list[str]:
    """A script that prints no metric line leaves throughput, progress and the projection empty: say so, once
    it has had the time to print one. Metric lines that could not be read are counted."""
    skipped = [] if not progress.malformed else [
        f"{progress.malformed} metric line{'s' if progress.malformed != 1 else ''} skipped: a value that is not a "
        f"number, or a throughput that is not finite and positive up to {MAX_SAMPLES_PER_S:g} (`{METRIC_FORMAT}`)"]
    return skipped + _no_metric_warning(view, progress)


def _no_metric_warning(view, progress: Progress) -> list[str]:
    if progress.rates or not progress.lines:
        return []
    if not view.finished and (view.training_seconds or 0) < SILENT_SECONDS:
        return []
    return [f"no metric line in the job's {progress.lines} log lines: `watch` reads `{METRIC_FORMAT}` from the "
            "script's output for throughput, progress and the projected cost, and a completed job's throughput "
            "feeds later plans; see docs/your-script.md"]


def never_checked_in(view) -> str | None:
    """A line for the nodes that run but never reached AWS (EC2: no log stream from their agent)."""
    silent = (view.raw or {}).get("never_checked_in") or []
    if not silent:
        return None
    return (f"{len(silent)} node{'s' if len(silent) != 1 else ''} running without ever checking in "
            f"({', '.join(silent)}): they bill but cannot reach AWS (several network cards get no public IPv4: "
            f"the subnet needs a NAT or VPC endpoints); `trainctl doctor` checks, `trainctl down {view.job_id}` ends them")


def summary(view, progress: Progress, record: JobRow | None, now: float | None = None) -> dict:
    """The `watch --once --output json` document (ARCHITECTURE.md contract, plus extras)."""
    now = time.time() if now is None else now
    option = record.option if record is not None else None
    expected = option.expected_cost_usd if option is not None else None
    training, billable = view.training_seconds, view.billable_seconds
    savings, basis = _spot_savings(view)
    od_hourly = _on_demand_hourly(view, option)
    cost = None
    if view.on_demand_usd is not None and view.raw.get("cost_usd") is not None:
        cost = round(float(view.raw["cost_usd"]), 6)  # EC2: what its instances cost, from their Spot prices
    elif billable is not None and od_hourly is not None:
        # Managed Spot is billed as billable seconds at the On-Demand rate: the discount is in the seconds.
        cost = round(billable / 3600 * od_hourly, 4)
    elif view.started_at and not view.finished:
        hourly = (option.hourly_usd if option is not None else None) or od_hourly
        if hourly is not None:
            cost = round((now - view.started_at) / 3600 * hourly, 4)
    steps = total_steps(view) or progress.total_steps
    projected = None
    if view.finished:
        projected = cost
    elif cost is not None and steps and progress.last_step:
        projected = round(cost * steps / progress.last_step, 4)
    elif expected is not None:
        projected = expected
    return {"job_id": view.job_id, "platform": view.platform, "status": view.status,
            "secondary_status": view.secondary_status, "training_seconds": training, "billable_seconds": billable,
            "spot_savings_pct": savings, "spot_savings_basis": basis, "cost_usd": cost, "throughput_samples_per_s": progress.samples_per_s,
            "interruptions": view.interruptions, "hosts": list(view.hosts),
            "replacements": (view.raw or {}).get("replacements") or [],  # EC2: by the survivors or --recover
            "region": view.region, "instance_type": view.instance_type, "count": view.count, "market": view.market,
            "step": progress.last_step, "steps": steps, "loss": progress.last_loss,
            "projected_cost_usd": projected, "expected_cost_usd": expected,
            "failure_reason": view.failure_reason, "warnings": _warnings(view, progress),
            "malformed_metric_lines": progress.malformed,
            "never_checked_in": never_checked_in(view),
            "transitions": [{"status": t.status, "start": t.start, "end": t.end, "message": t.message}
                            for t in view.transitions]}


def ran_to_the_end(view, progress: Progress) -> bool:
    """Whether the metric lines counted the run's steps to its end (issue 37): a job that stopped early (a script
    that exits 0 on SIGTERM, half-way) measures nothing later plans should trust. Unknown totals pass: the
    platform's own outcome (Completed) is then all there is."""
    steps = total_steps(view) or progress.total_steps
    if not steps:
        return True
    return progress.last_step is not None and progress.last_step >= steps


def record_outcome(store: JobStore, view, progress: Progress, record: JobRow | None) -> str | None:
    """Store the final status and, for a completed job trainctl launched, its measured throughput."""
    if record is None:
        return None
    store.set_status(view.job_id, view.status)
    unshared: list[str] = []  # what could not be written to the account's records, said after the outcome
    rate = progress.samples_per_s if ran_to_the_end(view, progress) else None  # never from a run cut short
    finished(record, view, rate, say=unshared.append)
    if view.status == "Completed" and rate and view.instance_type and record.model:
        store.record_measured(model=record.model, batch_size=int(record.batch_size or 0),
                              instance_type=view.instance_type, count=int(view.count or 1),
                              samples_per_s=progress.samples_per_s, job_id=view.job_id, account=record.account)
        record_comparison(store, record, progress.samples_per_s)  # `trainctl calibration` reads it back
        unshared.insert(0, f"measured {progress.samples_per_s:,.2f} samples/s on {view.count} x "
                           f"{view.instance_type}: later plans for {record.model} at batch {record.batch_size} use it")
    return "; ".join(unshared) or None


def read_all(backend, job_id: str, region: str, say: Callable[[str], None] = lambda m: None,
             interval: float = 2.0) -> tuple[Any, Progress, list]:
    """One look: describe plus every log line so far (for --once and `logs`)."""
    view = patiently(lambda: backend.describe(job_id, region), job_id, interval, say)
    progress, lines, cursor = Progress(), [], None
    while True:
        new, cursor = patiently(lambda: backend.logs(job_id, region, cursor), job_id, interval, say)
        if not new and not cursor.get("pending"):  # a run with pages left is not the end, even when empty
            break
        lines += new
        for ln in new:
            progress.feed(ln.message)
    return view, progress, lines


def follow(backend, job_id: str, region: str, *, interval: float = 2.0,
           on_transition: Callable[[Any], None] = lambda t: None, on_line: Callable[[Any], None] = lambda ln: None,
           on_update: Callable[[Any, Progress], None] = lambda v, p: None, logs: bool = True,
           recover: Callable[[Any], bool] | None = None,
           say: Callable[[str], None] = lambda m: None) -> tuple[Any, Progress]:
    """Poll until the job ends. Backoff: `interval` after a change, growing x1.5 up to 8 x interval while
    nothing happens. `recover` (from `recoverer`) gets every view and relaunches lost capacity; it returns
    True when it did something."""
    max_interval = interval * 8
    progress, cursor, shown_transitions = Progress(), None, 0
    delay = interval
    while True:
        view = patiently(lambda: backend.describe(job_id, region), job_id, interval, say)
        changed = False
        if recover is not None and recover(view):
            view, changed = backend.describe(job_id, region), True
        # the newest transition may still be open; show each once, when it starts
        fresh = view.transitions[shown_transitions:]
        changed = changed or bool(fresh)
        shown_transitions = len(view.transitions)
        # tell the backend what it cannot know by itself: a status change may mean new log streams
        cursor = {**(cursor or {}), "hosts": len(view.hosts), "relist": changed or bool((cursor or {}).get("relist"))}
        lines = []
        if logs:
            while True:  # drain: a burst of lines is read in a few pages, not one page per cycle
                new, cursor = patiently(lambda: backend.logs(job_id, region, cursor), job_id, interval, say)
                lines += new
                changed = changed or bool(new) or bool(cursor.get("pending"))
                if not view.finished or not (new or cursor.get("pending")):
                    break
        _in_time_order(fresh, lines, on_transition, lambda ln: (progress.feed(ln.message), on_line(ln)))
        on_update(view, progress)
        if view.finished:
            return view, progress
        delay = interval if changed else min(max_interval, delay * 1.5)
        time.sleep(delay)


def _in_time_order(transitions, lines, on_transition, on_line) -> None:
    """One poll's new transitions and log lines, merged by time: a job that completed within the poll shows its
    last lines before "Completed", not after. A transition goes before the lines of the same second."""
    events = [((t.start or 0.0), 0, i, t) for i, t in enumerate(transitions)]
    events += [(ln.timestamp_ms / 1000.0, 1, i, ln) for i, ln in enumerate(lines)]
    for _, kind, _, item in sorted(events, key=lambda e: e[:3]):
        (on_transition if kind == 0 else on_line)(item)


def recoverer(backend, job: JobRef, store: JobStore, say: Callable[[str], None],
              clock: Callable[[], float] = time.monotonic) -> Callable[[Any], bool]:
    """For `watch --recover`: when a job shows Interrupted (a Spot reclaim: nothing else is replaced), relaunch
    the capacity it lost (the nodes resume from the last checkpoint by themselves) and record each
    interruption, with its cost, once (see Recovery)."""
    if not backend.capabilities.recover:
        raise TrainctlError(f"--recover: {backend.platform} restarts interrupted jobs by itself (managed Spot); "
                            "drop --recover", exit_code=2)
    from trainctl.usecases.jobs.recovery import Recovery

    return Recovery(backend, job, store, say, clock)


def left_behind(view, record: JobRow | None) -> str | None:
    """The last line of `watch` for an ended job trainctl launched whose platform keeps some of its resources
    until `down` (Backend.left_after_end)."""
    from trainctl.backends import backend_class

    if not view.finished or record is None:
        return None
    return backend_class(view.platform).left_after_end(view)


def exit_code(view) -> int:
    return EXIT_CODES.get(view.status, 0)


def check_host(view, host: int | None) -> str | None:
    if host is None:
        return None
    if not 1 <= host <= len(view.hosts):
        raise TrainctlError(f"--host {host}: {view.job_id} has hosts 1..{len(view.hosts)}", exit_code=2)
    return view.hosts[host - 1]
