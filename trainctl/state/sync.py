"""The account as the shared state of its jobs, with the local store as a cache of it.

- `launch` writes the job's record (`JOB/job.json`) right before the job-starting call, so no job runs without
  one, and updates it with the platform's ids once AWS accepted the job (`at_launch`, `submitted`);
- a command given a job id its store does not know reads the record from the account and caches it
  (`from_account`): a colleague's laptop or a CI runner acts on the job as its launcher would, IAM deciding who
  may;
- whoever follows a job to its end writes its status and measured throughput to the account (`finished`), and
  a plan reads the account's measurements into the cache first (`sync_measurements`).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from trainctl.aws import clients as aws
from trainctl.errors import TrainctlError
from trainctl.state.documents import JobDocument, MeasurementDocument, UnknownFormat, spec_sha256
from trainctl.state.job_store import JobRow, JobStore

# The store's event of a job whose measurement `calibration --forget` removed here: the account's copy stays
# (other machines may use it), and is not read back into this machine's plans.
FORGOTTEN = "measurement-forgotten"
FUTURE_SLACK_S = 300  # clocks differ between machines by seconds; a measurement dated later than this is forged


def at_launch(spec, spec_path: str, request, option, previous: str | None, account: str,
              say: Callable[[str], None]) -> Callable[[], None]:
    """What runs right before the job-starting call (the job bucket exists by then): create the record. A
    record that cannot be written stops the launch before anything runs, except where the account's own bucket
    is not the job's (--bucket given, none of trainctl's in that region): then the launch goes on, said."""
    from trainctl.state import account as job_records

    def write() -> None:
        owner_account, arn = job_records.caller(request.region)
        if not (account or owner_account):
            say(f"{request.job_id}: AWS did not say which account this is: no record in the job bucket")
            return
        now = time.time()
        text = Path(spec_path).read_text()
        doc = JobDocument(job_id=request.job_id, platform=request.platform, region=request.region,
                          account=account or owner_account, spec_path=spec_path, spec_name=spec.name, spec_text=text,
                          spec_sha256=spec_sha256(text), model=spec.model.name,
                          batch_size=spec.workload.batch_size_per_accelerator, option=option,
                          failover_from=previous, launched_by=arn, launched_at=now, status="Submitting",
                          status_by=arn, updated_at=now)
        try:
            job_records.create(doc)
        except Exception as e:  # noqa: BLE001
            if aws.error_code(e) != "NoSuchBucket":
                raise
            say(f"{request.job_id}: no trainctl bucket of account {doc.account} in {request.region} (--bucket "
                "given): the job has no record there, so only this machine knows it")
    return write


def submitted(request, outputs: dict, account: str | None, say: Callable[[str], None]) -> None:
    """AWS accepted the job: its record gets the platform's ids and "InProgress" (best effort: the job runs)."""
    ids = {k: v for k, v in outputs.items() if isinstance(v, str)}
    _update(request.job_id, account, request.region, lambda d: {"status": "InProgress", "platform_ids": ids}, say)


def _update(job_id: str, account: str | None, region: str, change, say: Callable[[str], None]) -> None:
    from trainctl.state import account as job_records

    if not account:
        return
    _, arn = job_records.caller(region)
    try:
        job_records.update(job_id, account, region, lambda d: {**change(d), "status_by": arn})
    except Exception as e:  # noqa: BLE001 - the record lags; what AWS did is what counts
        say(f"{job_id}: its record in the account's bucket was not updated ({aws.error_summary(e)})")


def set_status(job_id: str, account: str, region: str, status: str, say: Callable[[str], None]) -> None:
    """Best effort: the record (if the account holds one) takes `status` and the caller's ARN."""
    _update(job_id, account, region, lambda d: {"status": status}, say)


def stop_requested(record: JobRow | None, say: Callable[[str], None]) -> None:
    """`stop`: the record says who asked ("Stopping", by this ARN) until the job's end replaces it."""
    if record is not None and record.region:
        _update(record.job_id, record.account, record.region, lambda d: {"status": "Stopping"}, say)


def from_account(store: JobStore, job_id: str, region: str) -> JobRow | None:
    """The job's record from the account's bucket in `region`, else in the account's other trainctl buckets
    (unless --region named the one to look in), cached in the store; None when the account holds none (or no
    account answers). A record of an unknown format raises UnknownFormat."""
    from trainctl.state import account as job_records

    account, _ = job_records.caller(region)
    if not account:
        return None
    found = job_records.read(job_id, account, region)
    if found is None and aws.SETTINGS.region is None:
        others = [r for r in _regions_or_none(account) if r != region]
        found = next((f for f in (job_records.read(job_id, account, r) for r in others) if f is not None), None)
    if found is None:
        return None
    doc = found[0]
    store.try_write(lambda db: cache(db, doc))  # a cache: a store that cannot take it costs a re-read later
    return JobRow(doc.job_id, store.endpoint, doc.account, doc.platform, doc.region, doc.spec_path,
                     doc.spec_name, doc.model, doc.batch_size, doc.option, doc.failover_from, doc.status,
                     doc.launched_at, doc.updated_at)


def _regions_or_none(account: str) -> list[str]:
    from trainctl.state import account as job_records

    try:
        return job_records.account_regions(account)
    except Exception:  # noqa: BLE001 - a principal that may not list buckets still finds jobs in its region
        return []


def regions(account: str) -> list[str]:
    """The regions to look in: the one --region names, else every region with the account's trainctl bucket
    and the default region."""
    if aws.SETTINGS.region is not None:
        return [aws.SETTINGS.region]
    return sorted({*_regions_or_none(account), aws.default_region()})


def cache(store: JobStore, doc: JobDocument) -> None:
    """The account's record as a local row, only where this machine has none: a row here (the launcher's) is never
    replaced from the account, whose records any colleague may write."""
    store.record_job(keep_existing=True, job_id=doc.job_id, account=doc.account, platform=doc.platform,
                     region=doc.region,
                     spec_path=doc.spec_path, spec_name=doc.spec_name, model=doc.model, batch_size=doc.batch_size,
                     option=doc.option, plan_json=None, status=doc.status, failover_from=doc.failover_from,
                     created_at=doc.launched_at)


def finished(record: JobRow | None, view, samples_per_s: float | None, say: Callable[[str], None]) -> None:
    """A job followed to its end: its status (and measured throughput) into the account's records."""
    from trainctl.state import account as job_records

    if record is None or not record.account or record.status == view.status:  # (already in the record)
        return
    region = record.region or view.region
    measured = samples_per_s if view.status == "Completed" and view.instance_type else None
    _update(view.job_id, record.account, region,
            lambda d: {"status": view.status, **({"samples_per_s": measured} if measured else {})}, say)
    if measured is None or not record.model:
        return
    _, arn = job_records.caller(region)
    doc = MeasurementDocument(job_id=view.job_id, account=record.account, model=record.model,
                              batch_size=int(record.batch_size or 0), instance_type=view.instance_type,
                              count=int(view.count or 1), samples_per_s=measured, measured_at=time.time(),
                              measured_by=arn)
    try:
        job_records.write_measurement(doc, region)
    except Exception as e:  # noqa: BLE001 - this machine still has it
        say(f"{view.job_id}: its measured throughput was not written to the account ({aws.error_summary(e)})")


def sync_measurements(store: JobStore, region: str) -> list[str]:
    """Read the account's measurements (in `region`'s bucket) that the store lacks into it; notes on what could
    not be read. Keyed by endpoint (the store's) and account (the bucket's): the sandbox's never mix in."""
    from trainctl.state import account as job_records

    account, _ = job_records.caller(region)
    if not account:
        return []
    notes: list[str] = []
    try:
        jobs = job_records.measurement_jobs(account, region)
    except Exception as e:  # noqa: BLE001 - the plan goes on with what this machine measured
        return [f"the account's measurements were not read ({aws.error_summary(e)})"]
    try:
        known = store.measured_jobs() | store.jobs_with_event(FORGOTTEN)
    except TrainctlError as e:  # a broken database: the plan goes on without the account's figures
        return [str(e)]
    for job_id in (j for j in jobs if j not in known):
        try:
            m = job_records.read_measurement(job_id, account, region)
        except UnknownFormat as e:
            notes.append(str(e))
            continue
        except Exception as e:  # noqa: BLE001
            notes.append(f"{job_id}: its measurement was not read ({aws.error_summary(e)})")
            continue
        if m is not None and m.measured_at > time.time() + FUTURE_SLACK_S:
            notes.append(f"{job_id}: its measurement in the account is dated in the future "
                         f"({m.measured_at:.0f}): not used")
            continue
        if m is not None:
            store.try_write(lambda db, m=m: db.record_measured(
                model=m.model, batch_size=m.batch_size, instance_type=m.instance_type, count=m.count,
                samples_per_s=m.samples_per_s, job_id=m.job_id, account=m.account, measured_at=m.measured_at))
            notes += _cache_record(store, job_id, account, region)
    return notes


def _cache_record(store: JobStore, job_id: str, account: str, region: str) -> list[str]:
    """A measured job's record into the store, unless it is there (`calibration` compares it with its plan)."""
    from trainctl.state import account as job_records

    try:
        if store.job(job_id) is not None:
            return []
        found = job_records.read(job_id, account, region)
    except Exception as e:  # noqa: BLE001 - the measurement is in; only the comparison waits
        return [str(e) if not hasattr(e, "response") else f"{job_id}: {aws.error_summary(e)}"]
    if found is not None:
        store.try_write(lambda db: cache(db, found[0]))
    return []


def sync_account(store: JobStore) -> list[str]:
    """The account's measurements and measured jobs, in every region of its trainctl buckets, into the store."""
    from trainctl.state import account as job_records

    try:
        account, _ = job_records.caller(aws.default_region())
    except Exception:  # noqa: BLE001 - no account to ask (no credentials): the store alone answers
        return []
    if not account:
        return []
    return [note for region in regions(account) for note in sync_measurements(store, region)]
