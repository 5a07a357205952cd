"""What a launch that did not end well says and records (launch.py calls these): whether the job-starting call
went out (the job may run: "Unknown" until AWS says otherwise) or not, exactly which calls were sent, the
cleanup's outcome, and a job submitted but not recorded. What AWS did is always said before the record's
failure: the record is what can be repaired."""
from __future__ import annotations

import json
from typing import Callable, NoReturn

from trainctl.backends.calls import JOB_STARTING, SubmitTrace
from trainctl.errors import TrainctlError
from trainctl.state.job_store import JobStore


def _recorded(store: JobStore, job_id: str, status: str, kind: str, detail: str) -> str | None:
    """Record a launch's outcome; the database's error in words instead of raising it (None when recorded):
    what AWS did matters more than the record, and must still be said."""
    return store.try_write(lambda db: (db.set_status(job_id, status), db.add_event(job_id, kind, detail)))


def record_submitted(store: JobStore, request, outputs: dict, say: Callable[[str], None]) -> None:
    """AWS accepted the job: record it, or say first that it runs, then fail."""
    job_id = request.job_id
    problem = _recorded(store, job_id, "InProgress", "submitted",
                        json.dumps({k: v for k, v in outputs.items() if isinstance(v, str)}))
    if problem is None:
        return
    find = (f"`trainctl ls --all` finds it, `trainctl watch {job_id} --platform {request.platform} --region "
            f"{request.region}` follows it")
    say(f"submitted {job_id}; could not record it: {problem}; {find}")
    raise TrainctlError(f"{job_id} was submitted and runs, but trainctl could not record it: {problem}; {find}, "
                        f"`trainctl down {job_id} --platform {request.platform}` ends it")


def _starting_operation(request) -> str:
    return next((c.operation for c in request.calls if c.operation in JOB_STARTING), "the job's start")


def interrupted(store: JobStore, request, trace: SubmitTrace, say: Callable[[str], None]) -> None:
    """Ctrl-C during submit: whether the job-starting call went out (the job may run: "Unknown" until AWS says
    otherwise) or not, or went out and the backend's cleanup removed all of it (nothing runs: "Interrupted"), and
    every call sent."""
    job_id, started = request.job_id, trace.starting_call()
    sent = ", ".join(trace.created()) or "no call yet"
    if started is not None and trace.cleaned_up:
        status, said = "Interrupted", (f"interrupted after {started[0].operation} was sent; the cleanup removed "
                                       f"everything {job_id} had, its instances included: nothing runs")
    elif started is not None:
        status, said = "Unknown", (f"interrupted after {started[0].operation} was sent: {job_id} may be running; "
                                   f"`trainctl ls` asks AWS, `trainctl down {job_id}` ends it and removes the rest")
    else:
        status, said = "Interrupted", (f"interrupted before {_starting_operation(request)} was sent: nothing runs; "
                                       f"`trainctl down {job_id}` removes what the launch created")
    problem = _recorded(store, job_id, status, "interrupted", f"Ctrl-C during submit; sent: {sent}")
    say(f"{said} (sent: {sent}; tagged trainctl:job={job_id})")
    if problem:
        say(f"could not record the interruption: {problem}")


def after_submit(store: JobStore, request, outputs: dict, account: str | None, say: Callable[[str], None]) -> None:
    """AWS accepted the job: the local record and the account's take its ids and "InProgress". A Ctrl-C here (the
    account's record update is slow under latency) names the job that now runs, and the account's record is
    still brought out of "Submitting" (which other machines read as a launch in progress) before it stops; a
    second Ctrl-C stops at once."""
    from trainctl.state import sync as shared_jobs

    job_id = request.job_id
    try:
        record_submitted(store, request, outputs, say)
        shared_jobs.submitted(request, outputs, account, say)
    except KeyboardInterrupt:
        say(f"interrupted after {job_id} was submitted: it runs; `trainctl watch {job_id}` follows it, "
            f"`trainctl down {job_id}` ends it and removes the rest")
        try:
            if (mine := store.job(job_id)) is not None and mine.status == "Submitting":
                record_submitted(store, request, outputs, say)
            shared_jobs.submitted(request, outputs, account, say)
        except KeyboardInterrupt:
            say(f"{job_id}: its record in the account's bucket may still say Submitting")
        raise


def submit_failed(store: JobStore, backend, request, e: Exception, say: Callable[[str], None],
                   trace: SubmitTrace) -> NoReturn:
    from trainctl.aws.clients import error_summary

    job_id, region = request.job_id, request.region
    cleaned = True
    try:
        removed = backend.cleanup(job_id, region)
        if removed:
            say(f"removed after the failed launch: {', '.join(removed)}")
    except Exception as ce:  # noqa: BLE001 - the launch error matters more; cleanup can be re-run
        cleaned = False
        say(f"cleanup after the failed launch did not finish ({error_summary(ce)}): `trainctl down {job_id}` "
            "removes the rest")
    started = trace.starting_call()
    # a job-starting call without an answer may still make instances after the cleanup looked
    if started is not None and (started[1] == "in flight" or not cleaned):
        status = "Unknown"
        say(f"{started[0].operation} was sent without an answer: {job_id} may be running; `trainctl ls` asks AWS")
    else:
        status = "SubmitFailed" if cleaned else "CleanupFailed"
    problem = _recorded(store, job_id, status, "submit-failed", error_summary(e))
    if problem:
        say(f"could not record the failed launch: {problem}")
    _share_outcome(store, request, status, say)
    raise TrainctlError(f"launch of {job_id} failed: {error_summary(e)}{backend.submit_error_hint(e)}") from e


def _share_outcome(store: JobStore, request, status: str, say: Callable[[str], None]) -> None:
    """The job's record in the account (written right before the job-starting call, if the launch got that
    far) takes the launch's outcome, so other machines do not read "Submitting" forever."""
    from trainctl.state.sync import set_status

    try:
        record = store.job(request.job_id)
    except Exception:  # noqa: BLE001 - no local record to say which account: the record keeps its status
        return
    if record is not None and record.account:
        set_status(request.job_id, record.account, request.region, status, say)
