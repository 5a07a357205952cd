"""`trainctl ls`: the newest jobs of this endpoint from the store, each with its live status from AWS, asked
about all at once with a short timeout per call (a slow endpoint costs the listing seconds, not minutes per
job). A record whose submit may have reached AWS ("Submitting", "Unknown") takes AWS's word once it comes."""
from __future__ import annotations

from trainctl.state.job_store import JobRow, JobStore
from trainctl.usecases.jobs.block_wait import WAITING, still_waiting, waiting_words


def list_jobs(store: JobStore, limit: int, live: bool = True, notes: list[str] | None = None) -> list[dict]:
    """The newest jobs of this endpoint from the store, each with its live status unless `live` is false.
    A job launched from another account is not asked about with these credentials (AWS would not know it).
    When the endpoint does not answer at all (a sandbox since stopped), no job is asked: `notes` gets one line
    saying so and each job shows its last recorded status."""
    jobs = store.jobs(limit)
    if store.skipped_rows and notes is not None:
        notes.append(skipped_note(store))
    if not live or not jobs:
        return [_listed(job) for job in jobs]
    from trainctl.aws.workers import interruptible_pool

    account, down = _account_or_down()
    if down is not None:
        (notes if notes is not None else []).append(f"{down}; the statuses below are the last recorded ones")
        return [{**_listed(job), "status": f"{job.status or '-'} (recorded)"} for job in jobs]
    # every job asked at once, each with a short timeout and one retry: a slow endpoint costs the listing
    # about LS_TIMEOUT_S, not minutes per job
    with interruptible_pool(min(LS_WORKERS, len(jobs))) as pool:
        live_status = list(pool.map(lambda job: _live_status(job, account), jobs))
    for job, found in zip(jobs, live_status):
        if job.status in AWAITING_AWS and found.get("status") and found.get("from_aws"):
            store.set_status(job.job_id, found["status"])  # AWS has said: the record no longer waits for it
    return [{**_listed(job), **{k: v for k, v in found.items() if k != "from_aws"}}
            for job, found in zip(jobs, live_status)]


def skipped_note(store: JobStore) -> str:
    n = store.skipped_rows
    return (f"{n} job row{'s' if n != 1 else ''} of trainctl's database skipped: created_at is not a number (a hand "
            "edit?); the other jobs are listed")


LS_TIMEOUT_S = 10.0
LS_WORKERS = 32  # every job of a default listing (20) asked at once: the listing costs one call's timeout, not
# one per round of workers (8 workers took 61.6 s for 20 jobs against a slow endpoint)


def _quick_client(service: str, region: str):
    from trainctl.aws import clients as aws

    return aws.client(service, region, max_attempts=2, read_timeout=LS_TIMEOUT_S)


def _account_or_down() -> tuple[str | None, str | None]:
    """(the credentials' account or None, the one line saying the endpoint does not answer, or None)."""
    from trainctl.aws import clients as aws

    try:
        return aws.client("sts", aws.default_region(), max_attempts=2).get_caller_identity()["Account"], None
    except Exception as e:  # noqa: BLE001 - then every job is asked about, as before accounts were kept
        return None, aws.unreachable_endpoint(e)


def caller_account() -> str | None:
    """The account of the credentials in use, or None when AWS does not say."""
    from trainctl.aws import clients as aws

    try:
        return aws.client("sts", aws.default_region()).get_caller_identity()["Account"]
    except Exception:  # noqa: BLE001 - then every job is asked about, as before accounts were kept
        return None


def _listed(job: JobRow) -> dict:
    o = job.option
    return {"job_id": job.job_id, "platform": job.platform, "region": job.region, "account": job.account or None,
            "layout": f"{o.count}x {o.instance_type}" if o else "-", "market": o.market if o else None,
            "status": job.status or "-", "secondary_status": None, "recorded_status": job.status,
            "expected_cost_usd": o.expected_cost_usd if o else None, "created_at": job.created_at,
            "spec": job.spec_path, "failover_from": job.failover_from, "cost_usd": None, "launched_by": None,
            "interruptions": None, "replacements": None}


# Recorded outcomes of launches that started nothing: AWS has nothing to say about them.
NOTHING_STARTED = ("SubmitFailed", "Interrupted", "NoCapacity")
# Recorded while AWS's answer is awaited: a launch in progress, or one whose job-starting call got no answer.
AWAITING_AWS = ("Submitting", "Unknown")


def _live_status(job: JobRow, account: str | None) -> dict:
    from trainctl.backends import get_backend

    if job.status in NOTHING_STARTED:
        return {}
    if job.status == WAITING:  # a bought Capacity Block not started yet: nothing on AWS runs for the job
        return {"status": waiting_words(job.option)}
    if job.status == "CleanupFailed":
        return {"status": f"CleanupFailed: `trainctl down {job.job_id}` removes what is left"}
    if account and job.account and job.account != account:
        return {"status": f"in account {job.account} (these credentials are {account}'s)"}
    try:
        v = get_backend(job.platform, _quick_client).describe(job.job_id, job.region)
    except Exception as e:  # noqa: BLE001 - one unreachable job must not hide the others
        from trainctl.aws.clients import error_summary

        return {"status": f"unknown ({error_summary(e)})"}
    if still_waiting(job.option, v.secondary_status):  # queued by the platform on a reservation not started yet
        return {"status": waiting_words(job.option), "secondary_status": v.secondary_status, "from_aws": True}
    return {"status": v.status, "secondary_status": v.secondary_status, "from_aws": True,
            "cost_usd": _cost_so_far(v, job), "interruptions": v.interruptions,
            "replacements": len((v.raw or {}).get("replacements") or [])}


def _cost_so_far(view, job: JobRow) -> float | None:
    """The running figure `watch` shows (billable seconds or instance lifetimes times the price)."""
    from trainctl.usecases.jobs.watch import Progress, summary

    try:
        return summary(view, Progress(), job)["cost_usd"]
    except Exception:  # noqa: BLE001 - a figure that cannot be made is left out, the status still shows
        return None


def listing_backends() -> list:
    """Every backend, with the listing's short timeouts, in the order of their tagged resource types."""
    from trainctl.backends import all_backends

    return sorted(all_backends(_quick_client), key=lambda b: b.tagged_resource_type)


def on_aws(region: str, known: set[str]) -> tuple[list[dict], list[str]]:
    """`ls --all`: the running jobs AWS holds in `region` under trainctl's tag that the store does not list
    (a launch recorded elsewhere, or not at all: a broken database, a record that failed), from AWS alone: each
    backend's `running_jobs`. Returns (rows, notes on what could not be asked)."""
    from trainctl.aws import clients as aws

    rows: dict[str, dict] = {}
    notes: list[str] = []
    for backend in listing_backends():
        try:
            for found in backend.running_jobs(region):
                rows.setdefault(found.job_id, _aws_row(found.job_id, backend.platform, region, found.status,
                                                       found.instance_type))
        except Exception as e:  # noqa: BLE001 - the other platforms may still answer
            notes.append(f"{backend.title} not asked ({aws.error_summary(e)})")
    return [row for job, row in rows.items() if job not in known], notes


def _aws_row(job: str, platform: str, region: str, status: str, instance_type: str | None) -> dict:
    return {"job_id": job, "platform": platform, "region": region, "account": None,
            "layout": instance_type or "-", "market": None, "status": status, "secondary_status": None,
            "recorded_status": "(not in this machine's records)", "expected_cost_usd": None, "created_at": None,
            "spec": None, "failover_from": None, "cost_usd": None, "launched_by": None}
