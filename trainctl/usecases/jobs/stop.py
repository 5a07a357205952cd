"""`trainctl stop JOB`: ask the job's platform to stop it so that it checkpoints first (Backend.stop), and record
who asked, here and in the account's record of the job."""
from __future__ import annotations

from typing import Callable

from trainctl.state.job_store import JobStore


def stop(store: JobStore, job_id: str, platform: str | None, grace_s: float | None,
         say: Callable[[str], None]) -> dict:
    """The platform's document of what was done; its "ended" names the status of a job that had already ended
    (nothing was stopped, nothing recorded)."""
    from trainctl.backends import get_backend
    from trainctl.usecases.jobs.watch import locate

    ref = locate(store, job_id, platform)
    doc = get_backend(ref.platform).stop(job_id, ref.region, grace_s, say)
    if doc.get("ended"):
        return doc
    if ref.record:
        store.add_event(job_id, "stop", "requested by the user")
        from trainctl.state.sync import stop_requested

        stop_requested(ref.record, say)  # the account's record names who asked
    return doc
