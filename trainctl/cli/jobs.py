"""The commands about launched jobs: watch, logs, ls, calibration, stop, down. Parse, call one core
function, render; heavy imports inside each command."""
from __future__ import annotations

from typing import Optional

import typer

from trainctl.cli.app import OPTS, app
from trainctl.cli.app import store as _store


PLATFORM_OF_UNKNOWN_JOB = typer.Option(None, "--platform", help="sagemaker or ec2: for a job trainctl did not "
                                                                 "launch (it is not in `trainctl ls`); --region "
                                                                 "names its region.")


@app.command()
def watch(
    job: str = typer.Argument(..., help="Job id (as printed by launch)."),
    once: bool = typer.Option(False, "--once", help="Look once and exit (with --output json: one document)."),
    interval: float = typer.Option(2.0, "--interval", min=0.05, help="Seconds between polls after a change; "
                                                                      "backs off to 8x while nothing changes."),
    no_logs: bool = typer.Option(False, "--no-logs", help="Status only."),
    recover: bool = typer.Option(False, "--recover", help="EC2: relaunch reclaimed Spot nodes (same AZ first); "
                                                          "the job resumes from its last checkpoint."),
    platform: Optional[str] = PLATFORM_OF_UNKNOWN_JOB,
) -> None:
    """Follow a job: status, logs, throughput, savings, dollars.

    Exits with the job's outcome: 0 Completed, 1 Failed, 3 Stopped; 5 when trainctl could not follow it (AWS
    kept refusing its reads: the job itself is not affected)."""
    from trainctl import render
    from trainctl.usecases import watch as w
    from trainctl.backends import get_backend
    from trainctl.render import watch as shown
    from trainctl.usecases.notify import Notifier, name_the_budget
    from trainctl.usecases.fetch import where_line

    with _store() as store:
        ref = w.locate(store, job, platform)
        backend = get_backend(ref.platform)
        recoverer = w.recoverer(backend, ref, store, say=shown.say) if recover else None
        notifier = Notifier.for_job(store, ref.record, shown.say)  # `launch --notify`: watch sends the news
        if once:
            if recoverer is not None:
                recoverer(backend.describe(job, ref.region))
            view, progress, _ = w.read_all(backend, job, ref.region, say=shown.say, interval=interval)
            if recoverer is None and view.secondary_status == "Interrupted" and backend.capabilities.recover:
                shown.say(shown.interrupted_hint(view))
        else:
            view, progress = shown.follow_live(backend, ref, interval=interval, logs=not no_logs, recover=recoverer,
                                               to_stderr=OPTS.output == "json",
                                               on_look=notifier.look if notifier else None)
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


@app.command()
def logs(
    job: str = typer.Argument(..., help="Job id."),
    host: Optional[int] = typer.Option(None, "--host", min=1, help="Only host N (1-based)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the job ends."),
    interval: float = typer.Option(2.0, "--interval", min=0.05, help="--follow: seconds between polls."),
    platform: Optional[str] = PLATFORM_OF_UNKNOWN_JOB,
) -> None:
    """Print a job's log lines, all hosts in time order, in full."""
    from trainctl.usecases import watch as w
    from trainctl.backends import get_backend
    from trainctl.render.watch import log_line, say
    from trainctl.usecases.transient import patiently

    with _store() as store:
        ref = w.locate(store, job, platform)
    backend = get_backend(ref.platform)
    only = w.check_host(patiently(lambda: backend.describe(job, ref.region), job, interval, say), host)

    def show(ln) -> None:
        if only is None or ln.host == only:
            typer.echo(log_line(ln, with_host=only is None))

    if follow:
        w.follow(backend, job, ref.region, interval=interval, on_line=show, say=say)
    else:
        for ln in w.read_all(backend, job, ref.region, say=say, interval=interval)[2]:
            show(ln)


@app.command("ls")
def list_jobs(
    limit: int = typer.Option(20, "--limit", min=1, help="Newest N jobs."),
    no_status: bool = typer.Option(False, "--no-status", help="Do not ask AWS for live status."),
    all_on_aws: bool = typer.Option(False, "--all", help="The account's trainctl jobs in the region, whoever "
                                                         "launched them (from AWS: tags and the job records)."),
) -> None:
    """List the jobs launched here, with their live status."""
    from trainctl import render
    from trainctl.render.watch import jobs_table
    from trainctl.store import BrokenStore
    from trainctl.usecases.job_list import list_jobs as list_jobs_of

    notes: list[str] = []
    with _store() as store:
        try:
            out = list_jobs_of(store, limit, live=not no_status, notes=notes)
        except BrokenStore as e:
            if not all_on_aws:
                raise
            notes.append(str(e))
            out = []
        if all_on_aws:
            from trainctl.usecases.account_jobs import list_account_jobs

            found, aws_notes = list_account_jobs(store, limit)
            listed = {j["job_id"] for j in found}
            out = found + [j for j in out if j["job_id"] not in listed]
            notes += aws_notes
    from trainctl.render.watch import say

    for note in notes:  # on stderr in both modes; the JSON document carries them too
        say(f"trainctl: warning: {note}")
    if OPTS.output == "json":
        render.print_json({"jobs": out, "warnings": notes})
    else:
        jobs_table(out)


@app.command()
def calibration(
    account: Optional[str] = typer.Option(None, "--account", help="Only the jobs this AWS account launched."),
    forget: Optional[str] = typer.Option(None, "--forget", help="Remove the throughput measured by job JOB: "
                                                                "later plans no longer use it.", metavar="JOB"),
    accept: Optional[str] = typer.Option(None, "--accept", help="Use the throughput measured by job JOB even where "
                                                                "plans quarantine it (above the hardware's peak).",
                                         metavar="JOB"),
) -> None:
    """Compare the model's throughput with what jobs measured.

    Per completed job: the prediction stored at launch, the measured rate and the error, then a summary."""
    from trainctl import render
    from trainctl.usecases.calibration import report
    from trainctl.render.calibration import calibration_table

    if forget is not None or accept is not None:
        from trainctl.render.watch import say
        from trainctl.usecases.calibration import accept as accept_job
        from trainctl.usecases.calibration import forget as forget_job
        from trainctl.usecases.watch import check_job_id

        with _store() as store:
            said = forget_job(store, check_job_id(forget)) if forget else accept_job(store, check_job_id(accept))
        if OPTS.output == "json":
            render.print_json({"job_id": forget or accept, "forgotten" if forget else "accepted": said})
        say(said)
        return
    with _store() as store:
        doc = report(store, account)
    if OPTS.output == "json":
        render.print_json(doc)
    else:
        calibration_table(doc)


@app.command()
def stop(
    job: str = typer.Argument(..., help="Job id."),
    grace_seconds: Optional[float] = typer.Option(
        None, "--grace-seconds", min=0, help="EC2: seconds the nodes get after the stop mark to checkpoint, upload "
                                             "and shut down before the rest are terminated (default 180: a Spot "
                                             "notice's two minutes plus the agent's 30 s poll and the shutdown; "
                                             "0: at once). SageMaker gives its own 120 s."),
    platform: Optional[str] = PLATFORM_OF_UNKNOWN_JOB,
) -> None:
    """Stop a running job (it checkpoints first).

    EC2: the stop mark, then the nodes checkpoint, upload and shut down; the ones left are terminated after
    the grace. SageMaker: StopTrainingJob (SIGTERM; the entrypoint checkpoints, the model is still uploaded)."""
    from trainctl import render
    from trainctl.usecases import watch as w
    from trainctl.backends import get_backend
    from trainctl.render.watch import say

    with _store() as store:
        ref = w.locate(store, job, platform)
        doc = get_backend(ref.platform).stop(job, ref.region, grace_seconds, say)
        if doc.get("ended"):  # nothing to stop: say so and exit 0
            render.print_json(doc) if OPTS.output == "json" else say(f"{job} already ended ({doc['ended']}); "
                                                                      f"nothing to stop; `trainctl down {job}` "
                                                                      "removes what it leaves")
            return
        if ref.record:
            store.add_event(job, "stop", "requested by the user")
            from trainctl.usecases.shared_jobs import stop_requested

            stop_requested(ref.record, say)  # the account's record names who asked
    if OPTS.output == "json":
        render.print_json(doc)
    say(f"stopping {job}; `trainctl watch {job}` follows it to the end")


@app.command()
def down(job: str = typer.Argument(..., help="Job id."), platform: Optional[str] = PLATFORM_OF_UNKNOWN_JOB) -> None:
    """Delete every resource tagged for a job (safe to repeat).

    Instances, fleet, launch template, placement group, security groups, role; S3 output stays."""
    from trainctl import render
    from trainctl.usecases import watch as w
    from trainctl.backends import get_backend
    from trainctl.render.watch import removed_lines

    from trainctl.errors import TrainctlError

    with _store() as store:
        ref = w.locate(store, job, platform)
        removed = get_backend(ref.platform).cleanup(job, ref.region)
        problem = store.try_write(lambda db: db.add_event(job, "down", ", ".join(removed) or "nothing left")) \
            if ref.record else None
    if OPTS.output == "json":
        render.print_json({"job_id": job, "platform": ref.platform, "region": ref.region, "removed": removed})
    else:
        removed_lines(job, ref.region, removed)
    if problem:  # what AWS did is said first: the record is what failed
        raise TrainctlError(f"{job}: removed {len(removed)} resources, but could not record it: {problem}")
