"""One bench job after the other: launch through the normal launch path, follow its metric lines, take it
down, record what it measured (see usecases/bench/measure.py)."""
from __future__ import annotations

import contextlib
import hashlib
import signal
import statistics
import threading
import time
from typing import Callable, Iterator

from trainctl.errors import TrainctlError
from trainctl.planner.bench_choice import Candidate
from trainctl.state.job_store import JobStore
from trainctl.usecases.jobs.watch import Progress


class CountedRates:
    """The metric lines' rates after the warm-up, and whether the measured steps were reached."""

    def __init__(self, warmup_steps: int, steps: int):
        self.warmup_steps, self.steps = warmup_steps, steps
        self.reader = Progress()
        self.rates: list[float] = []

    def feed(self, message: str) -> None:
        if self.reader.feed(message) and (self.reader.last_step or 0) > self.warmup_steps:
            self.rates.append(self.reader.rates[-1])

    @property
    def done(self) -> bool:
        return bool(self.rates) and (self.reader.last_step or 0) >= self.warmup_steps + self.steps


class Hangup(KeyboardInterrupt):
    """SIGTERM or SIGHUP during a bench (its terminal closed, its CI job cancelled, `kill`): taken as Ctrl-C is, so
    the bench jobs it launched are taken down instead of billing on with nobody following them."""


# the signals that end a bench as Ctrl-C does (SIGHUP: the terminal went away; not on every system)
ENDING_SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s)


@contextlib.contextmanager
def ending_signals_as_ctrl_c() -> Iterator[None]:
    """While the bench runs its jobs: SIGTERM and SIGHUP raise Hangup (a KeyboardInterrupt). Python handles
    signals in the main thread only; elsewhere (a test's thread) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def hang_up(signum, _frame):
        raise Hangup(signal.Signals(signum).name)

    before = {s: signal.signal(s, hang_up) for s in ENDING_SIGNALS}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def _ending_signals_ignored() -> Iterator[None]:
    """While the bench takes its jobs down: a second SIGTERM or SIGHUP (a terminal sends SIGHUP, then its shell
    SIGTERM) must not cut the take-down short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, signal.SIG_IGN) for s in ENDING_SIGNALS}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


class _Measured(Exception):
    """The job logged the measured steps: stop following it."""


class BenchRun:
    """The bench jobs of one `trainctl bench`: each is taken down when measured, all of them on Ctrl-C."""

    def __init__(self, inputs, spec, store: JobStore, say: Callable[[str], None], planned=None):
        """`planned`: the plan the layouts were chosen from (usecases/plan.py: Planned): the launch's checks take its
        options as ranked (usecases/plan.py: pinned); each bench job that runs is priced from its quotes (replan),
        not from AWS again."""
        self.inputs, self.spec, self.store, self.say, self.planned = inputs, spec, store, say, planned
        self.stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        self.running: dict[str, tuple[str, str]] = {}   # job id -> (platform, region), until taken down

    def measure(self, c: Candidate) -> dict:
        """Launch, follow, take down and record one layout: its row's measured part."""
        from trainctl.usecases.bench.spec import write_bench_spec

        path = write_bench_spec(self.inputs.spec_path, c.option, self.inputs.steps, self.inputs.warmup_steps,
                                self.stamp)
        job_id, region = self._launch(c, path)
        try:
            view, counted = self._follow(c, job_id, region)
        except TrainctlError as e:  # the job ran: its row names it, and its dollars are not known (not $0)
            e.job_id = job_id
            raise
        finally:
            self._down(job_id)
        if not view.finished:  # stopped by the bench once measured: its status after `down`
            from trainctl.backends import get_backend

            view = get_backend(c.option.platform).describe(job_id, region)
        return self._record(c, job_id, view, counted)

    def _launch(self, c: Candidate, path: str) -> tuple[str, str]:
        from trainctl.usecases.launch.launch_job import LaunchResult, launch

        o = c.option
        self.say(f"bench {c.layout} on {o.platform} in {o.region}: {self.inputs.warmup_steps} warm-up + "
                 f"{self.inputs.steps} measured steps, at most {self.inputs.max_minutes:g} min, bound "
                 f"${c.bound_usd:,.2f}")
        args = self._launch_args(c, path, dry_run=False)
        try:
            result = launch(args, self.store, say=lambda m: self.say(f"  {m}"), show=lambda opt, req: None,
                            confirm=lambda q: True)
        except KeyboardInterrupt:  # mid-launch: the job store already holds the attempt, AWS may hold the job
            for record in self.store.jobs(5):
                if record.spec_path == path:
                    self.running[record.job_id] = (record.platform, record.region or o.region)
            raise
        if not isinstance(result, LaunchResult):
            raise TrainctlError(f"bench of {c.layout}: the launch returned no job")
        self.running[result.job_id] = (result.platform, result.region)
        return result.job_id, result.region

    def _launch_args(self, c: Candidate, path: str, dry_run: bool):
        from trainctl.usecases.launch.launch_job import LaunchArgs

        planned = None
        if self.planned is not None:  # from the bench's plan, not AWS again
            from trainctl.usecases.plan import pinned, replan

            # the checks (a dry run) launch the option the plan ranked, planning nothing; a bench job that runs is
            # priced for its own short workload, which its launch line and the job store show
            planned = pinned(self.planned, path, c.option) if dry_run else \
                replan(self.planned, path, c.option.platform, self.store)
        return LaunchArgs(spec_path=path, platform=c.option.platform, offline=self.inputs.offline, yes=True,
                          allow_duplicate=True, dry_run=dry_run, planned=planned,
                          platform_options={"max_runtime_hours": self.inputs.max_minutes / 60.0})

    def refusals(self, chosen) -> dict[str, list[str]]:
        """Each layout's launch run as its --dry-run (prepare: reads only, every check a launch makes before it
        creates anything), before the bench asks or spends: {what refused: the layouts it refused}, each message
        once however many layouts share it (a boundary that does not admit the data bucket refuses them all)."""
        from trainctl.usecases.bench.spec import write_bench_spec
        from trainctl.usecases.launch.launch_job import launch

        refused: dict[str, list[str]] = {}
        for c in chosen:
            path = write_bench_spec(self.inputs.spec_path, c.option, self.inputs.steps, self.inputs.warmup_steps,
                                    self.stamp)
            try:
                launch(self._launch_args(c, path, dry_run=True), self.store, say=lambda m: None,
                       show=lambda opt, req: None, confirm=lambda q: True)
            except TrainctlError as e:
                refused.setdefault(str(e), []).append(c.layout)
        return refused

    def _follow(self, c: Candidate, job_id: str, region: str):
        """Follow the job to its end, or (a script that ignores the shortened workload: the bundled entrypoints
        end by themselves) until its metric lines passed the measured steps; `_down` then stops it."""
        from trainctl.backends import get_backend
        from trainctl.usecases.jobs.watch import follow

        backend = get_backend(self.running[job_id][0])
        counted = CountedRates(self.inputs.warmup_steps, self.inputs.steps)
        last: list = []

        def on_update(view, progress) -> None:
            last[:] = [view]
            if counted.done and not view.finished and not self.spec.entrypoint.bundled:
                raise _Measured

        try:
            view, _ = follow(backend, job_id, region, interval=self.inputs.interval,
                             on_line=lambda ln: counted.feed(ln.message), on_update=on_update,
                             on_transition=lambda t: self.say(f"  {job_id}: {t.status}"))
        except _Measured:
            self.say(f"  {job_id}: {self.inputs.steps} measured steps logged; stopping it")
            view = last[0]
        return view, counted

    def _down(self, job_id: str) -> None:
        from trainctl.backends import get_backend

        platform, region = self.running[job_id]
        try:
            removed = get_backend(platform).cleanup(job_id, region)
            self.store.add_event(job_id, "down", ", ".join(removed) or "nothing left")
        except Exception as e:  # noqa: BLE001 - said, and left for `trainctl down JOB`
            from trainctl.aws.clients import error_summary

            self.say(f"  {job_id}: down did not finish ({error_summary(e)}); run `trainctl down {job_id}`")
            return
        self.running.pop(job_id, None)
        self.say(f"  {job_id}: taken down")

    def take_down_all(self, why: str = "interrupted") -> None:
        """Ctrl-C, SIGTERM or SIGHUP: every bench job still up is stopped and its resources removed, whatever
        happens to the terminal meanwhile (a closed one fails every write: the take-down goes on silently)."""
        say = self.say

        def quiet(line: str) -> None:
            try:
                say(line)
            except (OSError, ValueError):  # EIO or a closed stream: the terminal is gone
                pass
        self.say = quiet
        with _ending_signals_ignored():
            for job_id in list(self.running):
                quiet(f"{why}: taking {job_id} down")
                self._down(job_id)

    def _record(self, c: Candidate, job_id: str, view, counted: CountedRates) -> dict:
        from trainctl.usecases.bench import record as bench_record
        from trainctl.usecases.jobs.watch import summary

        rate = median_rate(counted.rates)
        record = self.store.job(job_id)
        self.store.set_status(job_id, view.status)
        spent = summary(view, counted.reader, record).get("cost_usd")
        conditions = bench_record.conditions(self.spec, c.option, view, self.inputs, spec_hash=_spec_hash(
            self.inputs.spec_path), code_hash=_code_hash(self.spec, self.inputs.spec_path))
        row = {"job_id": job_id, "status": view.status, "measured_samples_per_s": rate,
               "measured_windows": len(counted.rates), "interruptions": view.interruptions,
               "spent_usd": spent, "regime": conditions["regime"]}
        if view.interruptions:
            row["note"] = (f"Spot interrupted {view.interruptions} time{'s' if view.interruptions != 1 else ''} "
                           "during the bench: recorded as data")
        far_below = _far_below_band(rate, c.option.throughput_band)
        if far_below:
            row["note"] = (row["note"] + "; " if row.get("note") else "") + far_below
        if rate is None:
            row["note"] = (row.get("note", "") + "; " if row.get("note") else "") + \
                f"no metric line after the {self.inputs.warmup_steps} warm-up steps: nothing measured"
        if record is not None:
            bench_record.record(self.store, record, view, rate, conditions)
        self.say(f"  {job_id}: {view.status}, " + (f"{rate:,.2f} samples/s" if rate else "nothing measured"))
        return row


# a measurement this many times under the band's low end is more likely a wrong reading than a slow model
FAR_BELOW = 10


def _far_below_band(rate: float | None, band) -> str | None:
    """A remark when the measured rate sits 10x or more under the band's low end: the band covers the model's
    errors on published sources, so that far out the metric line or the spec's model is the likelier cause."""
    if not rate or not band or band[0] <= 0 or rate * FAR_BELOW > band[0]:
        return None
    return (f"measured {rate:,.1f} samples/s, {band[0] / rate:,.0f}x below the band's low end {band[0]:,.0f}: check "
            "that the metric line's samples_per_s counts the whole layout's samples per second, and that the "
            "spec's model: is the model the script trains (the plan uses the measurement as it is)")


def median_rate(rates: list[float]) -> float | None:
    return round(statistics.median(rates), 2) if rates else None


def _spec_hash(spec_path: str) -> str:
    from pathlib import Path

    return hashlib.sha256(Path(spec_path).read_bytes()).hexdigest()[:16]


def _code_hash(spec, spec_path: str) -> str:
    from trainctl.backends.packaging import job_code

    return job_code(spec, spec_path)[0].key_hash
