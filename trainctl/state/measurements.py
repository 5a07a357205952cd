"""The measured-throughput half of `JobStore` (state/job_store.py): the table `measured_throughput`, which plans read.

A mixin of JobStore, whose connection, schema and endpoint it uses: state/job_store.py keeps the schema, its versions and
the jobs; this module keeps what a job measured. Every measurement is keyed by endpoint and account, as the jobs
are, so the sandbox's CPU figures never enter a plan for AWS.
"""
from __future__ import annotations

import time
from dataclasses import dataclass


ACCEPTED = "measurement-accepted"  # the event of `calibration --accept JOB`: used even above the hardware's peak


@dataclass(frozen=True)
class Measurement:
    model: str
    batch_size: int
    instance_type: str
    count: int
    samples_per_s: float
    job_id: str
    endpoint: str | None
    account: str
    measured_at: float


class MeasurementsTable:
    """JobStore's measured-throughput methods (JobStore provides `_reader`, `_connection` and `endpoint`)."""

    def record_measured(self, *, model: str, batch_size: int, instance_type: str, count: int,
                        samples_per_s: float, job_id: str, account: str = "", measured_at: float | None = None
                        ) -> None:
        """`measured_at`: when the job measured it, for a measurement read from the account (default: now)."""
        if not 0 < samples_per_s < float("inf"):
            raise ValueError(f"{job_id}: {samples_per_s!r} samples/s is not a measurement")
        now = time.time()
        # Every job's measurement is kept (one row per job: measured again, the newest stays); never dated later
        # than now (a measurement from the future would be the newest forever).
        with self._connection() as conn:
            conn.execute("INSERT INTO measured_throughput (endpoint, account, model, batch_size, instance_type, "
                         "count, samples_per_s, job_id, measured_at) VALUES (?,?,?,?,?,?,?,?,?) "
                         "ON CONFLICT (endpoint, account, job_id) DO UPDATE SET model=excluded.model, "
                         "batch_size=excluded.batch_size, instance_type=excluded.instance_type, "
                         "count=excluded.count, samples_per_s=excluded.samples_per_s, "
                         "measured_at=excluded.measured_at "
                         "WHERE excluded.measured_at >= measured_throughput.measured_at",
                         (self.endpoint, account, model, batch_size, instance_type, count, samples_per_s, job_id,
                          min(measured_at or now, now)))

    def measured_jobs(self) -> set[str]:
        """The jobs whose throughput this endpoint's store holds."""
        conn = self._reader()
        if conn is None:
            return set()
        return {r[0] for r in conn.execute("SELECT job_id FROM measured_throughput WHERE endpoint=?",
                                           (self.endpoint,))}

    def measurements(self, model: str, batch_size: int, *, include_unknown_origin: bool = False
                     ) -> list[Measurement]:
        """This endpoint's measurements of a model at a batch size, oldest first. Measurements recorded before
        trainctl kept the endpoint (v1) may come from the sandbox: they are left out of plans unless asked."""
        conn = self._reader()
        if conn is None:
            return []
        rows = conn.execute("SELECT * FROM measured_throughput WHERE model=? AND batch_size=? AND "
                            "(endpoint=? OR (? AND endpoint IS NULL)) ORDER BY measured_at, job_id",
                            (model, batch_size, self.endpoint, include_unknown_origin))
        # a rate that is no measurement (infinite, zero: stored by an older trainctl) is left out of plans;
        # `trainctl calibration --forget JOB` removes it
        return [Measurement(r["model"], r["batch_size"], r["instance_type"], r["count"], r["samples_per_s"],
                            r["job_id"], r["endpoint"], r["account"], r["measured_at"]) for r in rows
                if isinstance(r["samples_per_s"], (int, float)) and 0 < r["samples_per_s"] < float("inf")]

    def forget_measurements(self, job_id: str, event_kind: str) -> int:
        """Delete the throughput measured by a job (and its `event_kind` events); how many measurements went."""
        if self._reader() is None:
            return 0
        with self._connection() as conn:
            gone = conn.execute("DELETE FROM measured_throughput WHERE job_id=? AND (endpoint=? OR endpoint IS NULL)",
                                (job_id, self.endpoint)).rowcount
            gone += conn.execute("DELETE FROM events WHERE job_id=? AND kind=? AND (endpoint=? OR endpoint IS NULL)",
                                 (job_id, event_kind, self.endpoint)).rowcount
        return gone

    def measured_rates(self, model: str, batch_size: int):
        """(model, batch, instance type) -> the newest MeasuredRate per instance type, for the planner (oldest first
        in `measurements`, ties by job id: the same choice at every plan, whatever order they were read in).
        Throughput is a property of the hardware, not of the account, so any account of this endpoint counts."""
        from trainctl.planner import MeasuredRate

        accepted = self.jobs_with_event(ACCEPTED)
        return {(m.model, m.batch_size, m.instance_type): MeasuredRate(m.samples_per_s, m.count, m.job_id,
                                                                         accepted=m.job_id in accepted)
                for m in self.measurements(model, batch_size)}
