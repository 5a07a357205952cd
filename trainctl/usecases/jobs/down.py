"""`trainctl down JOB`: delete every resource tagged for the job (Backend.cleanup; safe to repeat) and record it."""
from __future__ import annotations

from dataclasses import dataclass

from trainctl.state.job_store import JobStore


@dataclass(frozen=True)
class Down:
    job_id: str
    platform: str
    region: str
    removed: list[str]
    problem: str | None        # why the store could not record it (what AWS did is done all the same)

    def to_json(self) -> dict:
        return {"job_id": self.job_id, "platform": self.platform, "region": self.region, "removed": self.removed}


def down(store: JobStore, job_id: str, platform: str | None) -> Down:
    from trainctl.backends import get_backend
    from trainctl.usecases.jobs.watch import locate

    ref = locate(store, job_id, platform)
    removed = get_backend(ref.platform).cleanup(job_id, ref.region)
    problem = store.try_write(lambda db: db.add_event(job_id, "down", ", ".join(removed) or "nothing left")) \
        if ref.record else None
    return Down(job_id, ref.platform, ref.region, removed, problem)
