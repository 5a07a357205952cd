"""`watch --recover` of an EC2 job: relaunch the Spot capacity it lost, within a budget and with a back-off, and
record each interruption once. Only Spot reclaims are replaced (the backend's describe says which nodes a
reclaim took); a node lost otherwise fails the job, and a job marked stopped is left alone. Of several watchers (two
laptops) exactly one relaunches a loss: the backend takes a claim in the job bucket first (a loser launches nothing,
says who holds it once, and goes on watching)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from trainctl.errors import TrainctlError
from trainctl.state.job_store import JobStore

# `watch --recover`: how many relaunches one watch makes before it stops (a job reclaimed this often is better
# moved by hand: another type, AZ or On-Demand), and the back-off between attempts that found no capacity.
MAX_RECOVERIES = 10
RETRY_FIRST_S, RETRY_MAX_S = 15.0, 300.0


@dataclass
class Recovery:
    """At most `max_recoveries` relaunches per watch; after a refusal for capacity the next try waits, doubling
    from RETRY_FIRST_S to RETRY_MAX_S; past the budget it stops with one line naming the cause."""

    backend: Any
    job: Any              # usecases.jobs.watch.JobRef: the job's id and region
    store: JobStore
    say: Callable[[str], None]
    clock: Callable[[], float]
    max_recoveries: int = MAX_RECOVERIES
    launched: int = 0
    refused: int = 0
    not_before: float = 0.0
    last: str = ""
    held_by: str = ""     # the last "another process relaunches it" answer: said once, not at every poll

    def __call__(self, view) -> bool:
        from trainctl.backends.base import CapacityError

        if view.finished or view.secondary_status != "Interrupted" or self.clock() < self.not_before:
            return False
        job_id = self.job.job_id
        if self.launched >= self.max_recoveries:
            raise TrainctlError(f"watch --recover: stopped recovering {job_id} after {self.launched} relaunches "
                                f"(last: {self.last}); Spot reclaims it too often here: `trainctl stop {job_id}` "
                                "and relaunch it on another layout or On-Demand", exit_code=1)
        try:
            result = self.backend.recover(job_id, self.job.region, progress=self.say)
        except CapacityError as e:
            self.refused += 1
            self.last = str(e)
            wait = min(RETRY_MAX_S, RETRY_FIRST_S * 2 ** (self.refused - 1))
            self.not_before = self.clock() + wait
            self.say(f"recovery of {job_id} found no capacity ({e}); trying again in {wait:.0f} s")
            return False
        self._record(result)
        holder = result.get("held_elsewhere")
        if holder:  # another watcher (or the nodes) relaunches this loss: said once, then watched
            who = holder.split(" holds it since ")[0]
            if who != self.held_by:
                self.say(f"{job_id}: its lost nodes are relaunched by another process ({holder}); launching "
                         "nothing here, watching on")
            self.held_by = who
            return False
        if result.get("launched"):
            self.launched += 1
            self.last = f"{len(result['launched'])} relaunched in {result.get('availability_zone')}"
            return True
        return False

    def _record(self, result: dict) -> None:
        job_id = self.job.job_id
        known = {json.loads(detail).get("instance_id") for _, detail in self.store.events(job_id, "interruption")}
        for item in result.get("interruptions", []):
            if item.get("instance_id") not in known:
                self.store.add_event(job_id, "interruption", json.dumps(item))
        if result.get("launched"):
            self.store.add_event(job_id, "recovered", json.dumps({k: result.get(k) for k in
                                                                  ("launched", "availability_zone", "moved",
                                                                   "missing")}))
