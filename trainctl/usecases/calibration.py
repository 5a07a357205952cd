"""How far off the plan's throughput has been: the prediction stored with each job against what it measured.

At launch the chosen option, its `throughput_samples_per_s` and `throughput_source` (model, given, or an
earlier measurement) included, is stored with the job (`JobStore.record_job`). When `watch` sees the job
complete it records the comparison as a `calibration` event of that job (`record_comparison`): the measured
table keeps only the newest job per layout, so the per-job figure must live with the job. `report` reads
them back for `trainctl calibration`; a completed job without the event (watched before trainctl kept it)
falls back to the measured table's row of that job, if it is still there.

Error = predicted / measured - 1, as in docs/model-accuracy.md: +20% means the plan expected 20% more
samples/s than the job delivered (its hours and dollars were 1/1.2 of what the run needed).
The store is per endpoint: the sandbox's jobs (CPU throughput) never mix with AWS's.
"""
from __future__ import annotations

import json
import statistics

from trainctl.state.job_store import JobRow, JobStore

EVENT = "calibration"
COMPLETED = "Completed"
MAX_JOBS = 100_000  # every job of the endpoint: the store has no other listing


def comparison(record: JobRow, measured: float | None) -> dict:
    """One job's row: what the plan predicted for its layout, what it measured, and the error."""
    opt = record.option
    predicted = opt.throughput_samples_per_s if opt is not None else None
    error = None
    if predicted is not None and measured:
        error = round(predicted / measured - 1.0, 4)
    return {"job_id": record.job_id, "account": record.account, "platform": record.platform,
            "model": record.model, "batch_size": record.batch_size,
            "layout": f"{opt.count} x {opt.instance_type}" if opt is not None else None,
            "throughput_source": opt.throughput_source if opt is not None else None,
            "predicted_samples_per_s": predicted,
            "band": list(opt.throughput_band) if opt is not None and opt.throughput_band else None,
            "measured_samples_per_s": measured, "error": error}


def record_comparison(store: JobStore, record: JobRow, measured: float) -> dict:
    """Store the comparison with the job (called by `watch` when the job completes)."""
    row = comparison(record, measured)
    detail = json.dumps({k: row[k] for k in ("predicted_samples_per_s", "throughput_source",
                                             "measured_samples_per_s", "error")})
    if (EVENT, detail) not in store.events(record.job_id, EVENT):  # watching a finished job again adds nothing
        store.add_event(record.job_id, EVENT, detail)
    return row


def _measured(store: JobStore, record: JobRow) -> float | None:
    for kind, detail in reversed(store.events(record.job_id, EVENT)):
        try:
            value = json.loads(detail).get("measured_samples_per_s")
        except (ValueError, AttributeError):
            continue
        if isinstance(value, (int, float)) and 0 < value < float("inf"):
            return float(value)
    if record.model is None or record.batch_size is None:
        return None
    for m in store.measurements(record.model, record.batch_size):
        if m.job_id == record.job_id:
            return m.samples_per_s
    return None


def forget(store: JobStore, job_id: str) -> str:
    """`trainctl calibration --forget JOB`: the job's measured throughput leaves later plans and this report."""
    gone = store.forget_measurements(job_id, EVENT)
    if gone:  # the account's copy stays (others may use it); this machine no longer reads it back
        from trainctl.state.sync import FORGOTTEN

        store.add_event(job_id, FORGOTTEN, "calibration --forget")
    if not gone:
        return f"{job_id}: no measured throughput recorded for it (`trainctl calibration` lists the jobs)"
    return f"{job_id}: its measured throughput is forgotten; later plans no longer use it"


def accept(store: JobStore, job_id: str) -> str:
    """`trainctl calibration --accept JOB`: a measurement quarantined as above the hardware's peak is used."""
    from trainctl.state.measurements import ACCEPTED

    if job_id not in store.measured_jobs():
        return f"{job_id}: no measured throughput recorded for it (`trainctl calibration` lists the jobs)"
    store.add_event(job_id, ACCEPTED, "calibration --accept")
    return f"{job_id}: its measured throughput is accepted; later plans use it even above the hardware's peak"


def _benched(store: JobStore, record: JobRow) -> bool:
    """A `trainctl bench` job (usecases/bench/record.py): listed beside the prediction whatever its end status
    (a bench of a user's script is stopped once measured)."""
    return bool(store.events(record.job_id, "bench"))


def summarise(rows: list[dict]) -> dict:
    errors = [r["error"] for r in rows if r["error"] is not None]
    out = {"completed_jobs": len(rows), "compared": len(errors), "median_abs_error": None,
           "median_error": None, "worst_abs_error": None, "worst_job": None, "within_band": None}
    if not errors:
        return out
    worst = max((r for r in rows if r["error"] is not None), key=lambda r: abs(r["error"]))
    banded = [r for r in rows if r["error"] is not None and r["band"]]
    out.update(median_abs_error=round(statistics.median(abs(e) for e in errors), 4),
               median_error=round(statistics.median(errors), 4),
               worst_abs_error=round(abs(worst["error"]), 4), worst_job=worst["job_id"])
    if banded:
        out["within_band"] = sum(r["band"][0] <= r["measured_samples_per_s"] <= r["band"][1] for r in banded)
    return out


def report(store: JobStore, account: str | None = None) -> dict:
    """The `trainctl calibration --output json` document: every completed job and bench job of this endpoint (of one
    account when asked), oldest first, and the summary."""
    from trainctl.state.sync import sync_account

    warnings = sync_account(store)  # the account's completed jobs, measured from any machine
    records = [r for r in reversed(store.jobs(MAX_JOBS))
               if (r.status == COMPLETED or _benched(store, r)) and (account is None or r.account == account)]
    rows = [{**comparison(r, _measured(store, r)), "measured_by": "bench" if _benched(store, r) else "job"}
            for r in records]
    return {"endpoint": store.endpoint or "aws", "account": account, "jobs": rows, "summary": summarise(rows),
            "warnings": warnings}
