"""`trainctl ls --all`: the account's trainctl jobs in a region, from AWS itself, whoever launched them and from
wherever. Found by the `trainctl:job` tag (Resource Groups Tagging API GetResources over what each backend's
jobs run on; each backend's own listing, `running_jobs`, as before) and by the records in the
account's trainctl bucket (`JOB/job.json`); each joined with its record (who launched it, the option and its
prediction), its live status and the dollars so far. Every record read is cached in the local store, so a
machine's store rebuilt from the account loses nothing."""
from __future__ import annotations

from trainctl.aws.workers import interruptible_pool

from trainctl.aws import clients as aws
from trainctl.naming.tags import JOB_TAG
from trainctl.state.documents import RECORD_NAME, JobDocument
from trainctl.state.job_store import JobRow, JobStore

WORKERS = 8


def tagged_jobs(region: str) -> dict[str, str]:
    """job id -> platform, for every resource tagged trainctl:job in `region` (Tagging API GetResources over
    what each backend's jobs run on: its `tagged_resource_type`, service:resourceType as the Tagging API's
    reference writes them; an ARN's service says whose it is)."""
    from trainctl.usecases.jobs.listing import _quick_client, listing_backends

    backends = listing_backends()
    by_service = {b.tagged_resource_type.split(":")[0]: b.platform for b in backends}
    found: dict[str, str] = {}
    pages = _quick_client("resourcegroupstaggingapi", region).get_paginator("get_resources").paginate(
        TagFilters=[{"Key": JOB_TAG}], ResourceTypeFilters=[b.tagged_resource_type for b in backends])
    for resource in (r for page in pages for r in page["ResourceTagMappingList"]):
        job = next((t["Value"] for t in resource.get("Tags", []) if t["Key"] == JOB_TAG), None)
        platform = by_service.get(resource["ResourceARN"].split(":")[2])  # arn:PARTITION:SERVICE:...
        if job and platform:
            found.setdefault(job, platform)
    return found


def recorded_jobs(account: str, region: str) -> list[str]:
    """The job ids with a record in the account's bucket in `region` (one listing: the top-level folders)."""
    from trainctl.naming.bucket import job_bucket, owner

    s3, bucket = aws.client("s3", region), job_bucket(account, region)
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Delimiter="/", **owner(account))
    prefixes = [p["Prefix"] for page in pages for p in page.get("CommonPrefixes", [])]
    return [p[:-1] for p in prefixes if p != "trainctl/"]


def list_account_jobs(store: JobStore, limit: int) -> tuple[list[dict], list[str]]:
    """(rows, newest first, at most `limit`; notes on what could not be asked or read), over the regions
    shared_jobs.regions names (--region, else every region with the account's trainctl bucket)."""
    from trainctl.state import account as job_records
    from trainctl.state.sync import regions

    account, _ = job_records.caller(aws.default_region())
    if not account:
        return [], ["AWS did not say which account these credentials are in: the account's jobs are not listed"]
    notes: list[str] = []
    found: dict[tuple[str, str], str | None] = {}   # (region, job id) -> platform when a resource is tagged
    for region in regions(account):
        found.update({(region, j): p for j, p in _found_in(region, account, notes).items()})
    with interruptible_pool(WORKERS) as pool:
        read = list(pool.map(lambda key: _record(key[1], account, key[0]), found))
    rows = []
    for (region, job_id), (doc, problem) in zip(found, read):
        if problem:
            notes.append(problem)
        if doc is not None or found[(region, job_id)] is not None:  # else a folder that is no job
            rows.append((doc, job_id, region))
    rows.sort(key=lambda r: -(r[0].launched_at if r[0] else 0))
    rows = rows[:limit]
    for doc, _, _ in rows:
        if doc is not None:
            store.try_write(lambda db, d=doc: _cache_unless_known(db, d))
    with interruptible_pool(WORKERS) as pool:
        return list(pool.map(lambda r: _row(r[0], r[1], found[(r[2], r[1])], r[2], account), rows)), notes


def _found_in(region: str, account: str, notes: list[str]) -> dict[str, str | None]:
    """job id -> platform (None: only its record says it exists) of the jobs of `region`: tagged resources (the
    Tagging API; EC2's tag filter and ListTrainingJobs, as before) and records in the account's bucket."""
    from trainctl.state import account as job_records
    from trainctl.usecases.jobs.listing import on_aws

    platforms: dict[str, str | None] = {}
    try:
        platforms.update(tagged_jobs(region))
    except Exception as e:  # noqa: BLE001 - the other sources may still answer
        notes.append(f"{region}: the Tagging API was not asked ({aws.error_summary(e)})")
    running, aws_notes = on_aws(region, set(platforms))
    notes += [f"{region}: {n}" for n in aws_notes]
    platforms.update({r["job_id"]: r["platform"] for r in running})
    try:
        for job_id in recorded_jobs(account, region):
            platforms.setdefault(job_id, None)
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) not in job_records.ABSENT:
            notes.append(f"{region}: the job records in the account's bucket were not listed "
                         f"({aws.error_summary(e)})")
    return platforms


def _cache_unless_known(store: JobStore, doc: JobDocument) -> None:
    from trainctl.state.sync import cache

    if store.job(doc.job_id) is None:
        cache(store, doc)


def _record(job_id: str, account: str, region: str) -> tuple[JobDocument | None, str | None]:
    from trainctl.state import account as job_records

    try:
        found = job_records.read(job_id, account, region)
    except Exception as e:  # noqa: BLE001 - one record that cannot be read must not hide the others
        return None, str(e) if not hasattr(e, "response") else f"{job_id}/{RECORD_NAME}: {aws.error_summary(e)}"
    return (found[0] if found else None), None


def _row(doc: JobDocument | None, job_id: str, platform: str | None, region: str, account: str) -> dict:
    from trainctl.usecases.jobs.listing import _listed, _live_status

    # a job without a record was found by a tagged resource, which says its platform
    record = JobRow(job_id, None, account, doc.platform if doc else str(platform),
                       doc.region if doc else region, doc.spec_path if doc else None,
                       doc.spec_name if doc else None, doc.model if doc else None,
                       doc.batch_size if doc else None, doc.option if doc else None,
                       doc.failover_from if doc else None, doc.status if doc else None,
                       doc.launched_at if doc else None, doc.updated_at if doc else None)
    live = _live_status(record, account)
    return {**_listed(record), **{k: v for k, v in live.items() if k != "from_aws"},
            "launched_by": doc.launched_by if doc else None,
            "recorded_status": doc.status if doc else "(no record in the account's bucket)"}
