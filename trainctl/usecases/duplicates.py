"""Two identical jobs by accident are money burnt: before a launch, the jobs of the same spec (by its name) that
this endpoint's store records and that AWS still says are running."""
from __future__ import annotations

from trainctl.store import JobStore

# Recorded outcomes after which a job holds no instances: AWS need not be asked about it again. A launch whose
# job-starting call went out records "Unknown" instead (launch.py), which is asked about like a running job.
ENDED = ("Completed", "Failed", "Stopped", "SubmitFailed", "NoCapacity", "Interrupted", "CleanupFailed")
# How far back the store is read: a spec's running jobs are among its newest.
RECENT = 200


def running_jobs_of(store: JobStore, spec_name: str) -> list[tuple[str, str]]:
    """(job id, live status) of each job of `spec_name` that is still running. A job AWS says it does not know
    (or reports ended) is not counted: the check must not block a launch over a record that is out of date. A
    job AWS could not be asked about is counted as "unknown": it may run."""
    from trainctl.aws.clients import error_summary
    from trainctl.backends import get_backend
    from trainctl.errors import TrainctlError

    running = []
    for job in store.jobs(RECENT):
        if job.spec_name != spec_name or job.status in ENDED:
            continue
        try:
            view = get_backend(job.platform).describe(job.job_id, job.region)
        except TrainctlError:  # AWS answered that it has no such job (deleted, never created): not running
            continue
        except Exception as e:  # noqa: BLE001 - no answer: it may run
            running.append((job.job_id, f"unknown: AWS could not be asked ({error_summary(e)})"))
            continue
        if view.finished:
            store.set_status(job.job_id, view.status)
            continue
        running.append((job.job_id, "/".join(s for s in (view.status, view.secondary_status) if s)))
    return running


def duplicate_question(running: list[tuple[str, str]], spec_name: str) -> str:
    jobs = ", ".join(f"{job} ({status})" for job, status in running)
    return f"an earlier job of spec {spec_name} still runs: {jobs}"
