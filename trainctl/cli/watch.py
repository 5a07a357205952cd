"""`trainctl watch JOB`: the CLI drives the watch use case (usecases/jobs/watch.py: `follow`) and feeds the
live view (render/watch.py), which only renders."""
from __future__ import annotations

from typing import Any, Callable, Optional

import typer

from trainctl.cli.app import OPTS, PLATFORM_OF_UNKNOWN_JOB, app
from trainctl.cli.app import store as _store


@app.command()
def watch(
    job: str = typer.Argument(..., help="Job id (as printed by launch)."),
    once: bool = typer.Option(False, "--once", help="Look once and exit (with --output json: one document)."),
    interval: float = typer.Option(2.0, "--interval", min=0.05, help="Seconds between polls after a change; "
                                                                      "backs off to 8x while nothing changes."),
    no_logs: bool = typer.Option(False, "--no-logs", help="Do not print the job's log lines (the progress, the "
                                                           "throughput and its measurement still come from them)."),
    recover: bool = typer.Option(False, "--recover", help="EC2: relaunch reclaimed Spot nodes (same AZ first); "
                                                          "the job resumes from its last checkpoint."),
    platform: Optional[str] = PLATFORM_OF_UNKNOWN_JOB,
) -> None:
    """Follow a job: status, logs, throughput, savings, dollars.

    Exits with the job's outcome: 0 Completed, 1 Failed, 3 Stopped; 5 when trainctl could not follow it (AWS
    kept refusing its reads: the job itself is not affected)."""
    from trainctl import render
    from trainctl.usecases.jobs import watch as w
    from trainctl.backends import get_backend
    from trainctl.render import watch as shown
    from trainctl.usecases.jobs.notify import Notifier, name_the_budget
    from trainctl.usecases.jobs.fetch import where_line

    with _store() as store:
        ref = w.locate(store, job, platform)
        _waiting_for_block(ref.record)  # a bought Capacity Block not started yet: nothing runs, nothing to follow
        backend = get_backend(ref.platform)
        recoverer = w.recoverer(backend, ref, store, say=shown.say) if recover else None
        notifier = Notifier.for_job(store, ref.record, shown.say)  # `launch --notify`: watch sends the news
        if once:
            if recoverer is not None:
                recoverer(backend.describe(job, ref.region))
            view, progress, _ = w.read_all(backend, job, ref.region, say=shown.say, interval=interval)
            _once_hints(backend, ref, view, recoverer is None)
        else:
            def look(view, progress) -> None:  # each look's news, the end's with its reason (a budget's stop)
                news = w.summary(view, progress, ref.record)
                name_the_budget(store, view, news)
                notifier.look(news)

            view, progress = _follow_live(backend, ref, interval=interval, logs=not no_logs, recover=recoverer,
                                          to_stderr=OPTS.output == "json", on_look=look if notifier else None)
        doc = w.summary(view, progress, ref.record)
        name_the_budget(store, view, doc)
        if notifier:
            notifier.look(doc)
        note = w.record_outcome(store, view, progress, ref.record) if view.finished else None
    if OPTS.output == "json":
        render.print_json(doc)
    else:
        shown.summary_table(doc)
    for warning in doc["warnings"]:
        shown.say(f"warning: {warning}")
    if note:
        shown.say(note)
    if ref.record is not None:  # where the model, TensorBoard events and checkpoints are
        shown.say(where_line(job, ref.platform, ref.record.account, ref.region))
    if w.left_behind(view, ref.record):
        shown.say(w.left_behind(view, ref.record))
    raise typer.Exit(w.exit_code(view))


def _waiting_for_block(record) -> None:
    from trainctl import render
    from trainctl.render import watch as shown
    from trainctl.usecases.jobs.block_wait import WAITING, waiting_words

    if record is None or record.status != WAITING:
        return
    said = waiting_words(record.option)
    if OPTS.output == "json":
        render.print_json({"job_id": record.job_id, "platform": record.platform, "status": WAITING, "message": said})
    else:
        shown.say(f"{record.job_id}: {said}")
    raise typer.Exit(0)


def _once_hints(backend, ref, view, unrecovered: bool) -> None:
    """`watch --once`: what an interrupted job waits for, and what a queued one waits for."""
    from trainctl.render import watch as shown

    if unrecovered and view.secondary_status == "Interrupted" and backend.capabilities.recover:
        shown.say(shown.interrupted_hint(view))
    _queued_for_block(ref.record, view, shown.say)


def _queued_for_block(record, view, say) -> None:
    """A job the platform queued on a reservation that has not started (SageMaker: Pending on its training plan)."""
    from trainctl.usecases.jobs.block_wait import still_waiting, waiting_words

    if record is not None and still_waiting(record.option, view.secondary_status):
        say(f"{record.job_id}: {waiting_words(record.option)}")


def _follow_live(backend, ref, *, interval: float, logs: bool, recover: Callable[[Any], bool] | None,
                 to_stderr: bool, on_look: Callable[[Any, Any], None] | None = None):
    """`follow` for people: the use case polls, the live view (render/watch.py) shows each look."""
    from trainctl.render import watch as shown
    from trainctl.usecases.jobs import watch as w

    live = shown.LiveView(ref.job_id, to_stderr)
    hinted = []

    def on_update(view, progress) -> None:
        if on_look is not None:  # `launch --notify`: each look's news (usecases/jobs/notify.py)
            on_look(view, progress)
        if recover is None and view.secondary_status == "Interrupted" and not hinted and backend.capabilities.recover:
            hinted.append(True)  # once: a job left Interrupted waits for nobody
            live.note(shown.interrupted_hint(view))
        if live.shows_status:
            live.update(w.summary(view, progress, ref.record))
        if not hinted:
            _queued_for_block(ref.record, view, lambda said: (hinted.append(True), live.note(said)))

    with live:
        # the lines are read without `logs` too (--no-logs): the status line's step and rate, and the measured
        # throughput stored at the end, come from the metric lines; they are only not printed
        return w.follow(backend, ref.job_id, ref.region, interval=interval, on_transition=live.transition,
                        on_line=live.line if logs else (lambda line: None), on_update=on_update, logs=True,
                        recover=recover, say=shown.say)
