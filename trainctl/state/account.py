"""The job records in the account's trainctl bucket (trainctl-ACCOUNT-REGION): read, created and updated with
S3's conditional writes, so two people (or a laptop and a CI runner) acting on one job never lose each other's
write.

- Created with `PutObject If-None-Match: *`: only when no object has the key (a second launch of the same job
  id, or a racing writer, gets 412 PreconditionFailed and writes nothing).
- Updated with `PutObject If-Match: ETAG` of the version read: a writer that read an older version gets 412
  (409 ConditionalRequestConflict when two such writes meet) and reads again, applies its change to what the
  other wrote, and tries again.

Amazon S3 User Guide, "How to prevent object overwrites with conditional writes"; S3 API reference, PutObject
(`If-None-Match`, `If-Match`); docs/aws-rules.md. Every call names the bucket's owner (ExpectedBucketOwner)
and asks for SSE-S3, as every write into the job bucket does (backends/bucket_calls.py).
"""
from __future__ import annotations

import random
import time
from typing import Callable

from trainctl.aws import clients as aws
from trainctl.errors import TrainctlError
from trainctl.naming.bucket import job_bucket, owner
from trainctl.naming.tags import JOB_TAG
from trainctl.text.safe import clean
from trainctl.state.documents import (DamagedRecord, JobDocument, MeasurementDocument, MEASUREMENTS_PREFIX, dump,
                              measurement_key, parse, record_key)

ABSENT = ("NoSuchKey", "NoSuchBucket", "404", "NotFound")
LOST_RACE = ("PreconditionFailed", "ConditionalRequestConflict")
UPDATE_ATTEMPTS = 10
BACKOFF_BASE_S = 0.1   # the first wait's most; doubled each lost race, up to BACKOFF_CAP_S
BACKOFF_CAP_S = 3.0


class RecordConflict(TrainctlError):
    """An update that kept losing the race (UPDATE_ATTEMPTS times in a row)."""


def caller(region: str) -> tuple[str, str]:
    """(account, ARN) of the credentials in use, ('', '') when AWS does not say."""
    try:
        me = aws.client("sts", region).get_caller_identity()
    except Exception:  # noqa: BLE001 - the record is still useful without it
        return "", ""
    return me["Account"], me["Arn"]


def account_regions(account: str) -> list[str]:
    """The regions where the account has its trainctl bucket (trainctl-ACCOUNT-REGION), from one ListBuckets."""
    prefix = job_bucket(account, "")
    s3 = aws.client("s3", aws.default_region())
    names = [b["Name"] for page in s3.get_paginator("list_buckets").paginate(Prefix=prefix)
             for b in page.get("Buckets", [])]
    return sorted(n[len(prefix):] for n in names if n.startswith(prefix))


def _where(account: str, region: str, key: str) -> str:
    return f"s3://{job_bucket(account, region)}/{key}"


def _put(account: str, region: str, key: str, body: bytes, job_id: str, **condition: str) -> str:
    import urllib.parse

    answer = aws.client("s3", region).put_object(
        Bucket=job_bucket(account, region), Key=key, Body=body, ContentType="application/json",
        ServerSideEncryption="AES256", Tagging=f"{JOB_TAG}={urllib.parse.quote(job_id)}", **owner(account),
        **condition)
    return answer["ETag"]


def create(doc: JobDocument) -> str:
    """Write a new job's record (If-None-Match: *); its ETag. A record already at the key is never replaced."""
    try:
        return _put(doc.account, doc.region, record_key(doc.job_id), dump(doc), doc.job_id, IfNoneMatch="*")
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) in LOST_RACE:
            raise TrainctlError(f"{doc.job_id}: {_where(doc.account, doc.region, record_key(doc.job_id))} already "
                                "exists: another launch wrote this job's record first; launch again (a new id)") from None
        raise


def read(job_id: str, account: str, region: str) -> tuple[JobDocument, str] | None:
    """(the job's record, its ETag), or None when the account's bucket in `region` holds none. A record of a
    format this trainctl does not know raises records.UnknownFormat (one line)."""
    key = record_key(job_id)
    try:
        got = aws.client("s3", region).get_object(Bucket=job_bucket(account, region), Key=key, **owner(account))
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) in ABSENT:
            return None
        raise TrainctlError(f"{job_id}: reading {_where(account, region, key)}: {aws.error_summary(e)}") from None
    where = _where(account, region, key)
    doc = parse(JobDocument, _capped(got, where), where, job_id)
    _agrees(doc, job_id, account, where, region)
    return doc, got["ETag"]


MAX_RECORD_BYTES = 1 << 20  # a record is a few KB (the spec's text the largest part); a bigger object is not one


def _capped(got: dict, where: str) -> bytes:
    """The object's body, never more than MAX_RECORD_BYTES read (a 40 MB object is refused, not read whole)."""
    body = got["Body"].read(MAX_RECORD_BYTES + 1)
    if len(body) > MAX_RECORD_BYTES:
        raise DamagedRecord(f"{where} is over {MAX_RECORD_BYTES} bytes; trainctl writes a few KB: not read")
    return body


def _agrees(doc, job_id: str, account: str, where: str, region: str | None = None) -> None:
    """A record names the job of its key, the account of its bucket (and its region): another body (a colleague's
    hand-written `X/job.json` naming job V) would otherwise stand for a job it is not the record of."""
    said = {"job_id": doc.job_id, "account": doc.account, **({"region": doc.region} if region else {})}
    wanted = {"job_id": job_id, "account": account, **({"region": region} if region else {})}
    for field in said:
        if said[field] != wanted[field]:
            raise DamagedRecord(f"{job_id}: {where} names {field} {clean(said[field], one_line=True)[:80]!r}, "
                                f"not {wanted[field]!r} as its key and bucket say: the record is refused")


def update(job_id: str, account: str, region: str, change: Callable[[JobDocument], dict],
           jitter: Callable[[], float] = random.random, sleep: Callable[[float], object] = time.sleep
           ) -> JobDocument | None:
    """Apply `change` (the record -> the fields to set) with If-Match on the version read; on a lost race wait
    (exponential back-off with full jitter: `jitter()` in [0, 1) times the step) then read the other writer's
    version and apply the change to it. Re-reading at once, four writers kept colliding (21 of 80 updates gave
    up); spread out, they take turns. None when the job has no record in the account."""
    for attempt in range(UPDATE_ATTEMPTS):
        found = read(job_id, account, region)
        if found is None:
            return None
        doc, etag = found
        new = doc.model_copy(update={**change(doc), "updated_at": time.time()})
        try:
            _put(account, region, record_key(job_id), dump(new), job_id, IfMatch=etag)
            return new
        except Exception as e:  # noqa: BLE001
            if aws.error_code(e) in ABSENT:  # deleted since the read: If-Match on no object is 404 NoSuchKey
                return None
            if aws.error_code(e) not in LOST_RACE:
                raise
        if attempt < UPDATE_ATTEMPTS - 1:
            sleep(jitter() * min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** attempt))
    raise RecordConflict(f"{job_id}: {_where(account, region, record_key(job_id))} kept changing under this "
                         f"update ({UPDATE_ATTEMPTS} tries); run the command again")


def write_measurement(doc: MeasurementDocument, region: str) -> bool:
    """Write a completed job's throughput once (If-None-Match: *): False when it was already there (another
    machine that followed the job wrote it first; a job completes once, so its measurement is the same)."""
    try:
        _put(doc.account, region, measurement_key(doc.job_id), dump(doc), doc.job_id, IfNoneMatch="*")
        return True
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) in LOST_RACE:
            return False
        raise


def measurement_jobs(account: str, region: str) -> list[str]:
    """The ids of the jobs whose measurement the account's bucket in `region` holds ([] without a bucket)."""
    s3 = aws.client("s3", region)
    jobs: list[str] = []
    try:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=job_bucket(account, region),
                                                             Prefix=MEASUREMENTS_PREFIX, **owner(account))
        for page in pages:
            jobs += [o["Key"][len(MEASUREMENTS_PREFIX):-len(".json")] for o in page.get("Contents", [])
                     if o["Key"].endswith(".json")]
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) in ABSENT:
            return []
        raise
    return jobs


def read_measurement(job_id: str, account: str, region: str) -> MeasurementDocument | None:
    key = measurement_key(job_id)
    try:
        got = aws.client("s3", region).get_object(Bucket=job_bucket(account, region), Key=key, **owner(account))
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) in ABSENT:
            return None
        raise
    where = _where(account, region, key)
    doc = parse(MeasurementDocument, _capped(got, where), where, job_id)
    _agrees(doc, job_id, account, where)
    return doc
