"""The job bucket, the same for both platforms: trainctl's own bucket (trainctl-ACCOUNT-REGION) is created
when missing and kept locked down (SSE-S3 by default, every public access blocked) on every launch; a
bucket the user gives (--bucket) must exist and is used as it is. Either must be owned by the caller's
account: every call names the owner (ExpectedBucketOwner), so a bucket that another account created first
under the predictable name is refused by S3 (403), never written to.

The job's code goes to its content-addressed key (naming/bucket.py) with its SHA-256 checksum, which S3
verifies on upload and returns on HeadObject: an object already at the key is reused only when its
checksum is the code's."""
from __future__ import annotations

import base64
import binascii
import urllib.parse
from typing import Any

from trainctl.aws import clients as aws
from trainctl.naming.bucket import code_key, job_bucket, owner
from trainctl.backends.base import JOB_TAG, AwsCall, tags
from trainctl.errors import TrainctlError, UsageError

MISSING = ("404", "NoSuchBucket", "NotFound")


def check_bounded_bucket(given: str | None, other_role: str) -> None:
    """A role trainctl creates carries the permissions boundary, which allows S3 only in buckets named
    trainctl-* (iam/boundary.py): with another bucket its job could neither read its code nor write a
    checkpoint, and would fail after billing starts. Refused before anything is created."""
    from fnmatch import fnmatchcase

    from trainctl.iam.constants import BUCKET

    if given and not fnmatchcase(given, BUCKET):
        raise UsageError(f"--bucket {given}: the roles trainctl creates carry its permissions boundary, which "
                         f"allows S3 only in buckets named {BUCKET}; use a bucket named trainctl-..."
                         f"{other_role} (docs/security.md)")


def job_bucket_calls(s3, job_id: str, region: str, account: str, given: str | None,
                     notes: list[str], other_role: str | None = "") -> tuple[str, list[AwsCall]]:
    """(bucket name, the calls that make it ready); reads whether it exists, writes nothing. `other_role`: None
    when the job runs with a role the user gave (its policy decides), else how to get one (or "")."""
    if other_role is not None:
        check_bounded_bucket(given, other_role)
    bucket = given or job_bucket(account, region)
    try:
        s3.head_bucket(Bucket=bucket, **owner(account))
        exists = True
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) not in MISSING:
            raise TrainctlError(f"job bucket {bucket}: {aws.error_summary(e)} (it must exist and be owned by "
                                f"account {account}); pass --bucket with a bucket this account owns") from None
        exists = False
    calls: list[AwsCall] = []
    if given:
        if not exists:
            raise UsageError(f"--bucket {bucket}: no such bucket in {region}; create it or drop --bucket")
        notes.append(f"job bucket {bucket} (given)")
        return bucket, calls
    if not exists:
        params: dict[str, Any] = {"Bucket": bucket}
        if region != "us-east-1":  # us-east-1 refuses a LocationConstraint naming itself
            params["CreateBucketConfiguration"] = {"LocationConstraint": region}
        calls.append(AwsCall("s3", "CreateBucket", params, region, ok_errors=("BucketAlreadyOwnedByYou",),
                             why="the account's trainctl job bucket"))
        # Shared by every job of the account and region: tagged with the job that created it,
        # and marked shared so cleanup of that job leaves it alone.
        calls.append(AwsCall("s3", "PutBucketTagging", {"Bucket": bucket, "Tagging": {"TagSet": tags(
            job_id, **{"trainctl:shared": "true"})}, **owner(account)}, region, why="tag the bucket"))
        notes.append(f"job bucket {bucket} will be created (SSE-S3 encrypted, public access blocked)")
    else:
        notes.append(f"job bucket {bucket} exists")
    # idempotent: keeps trainctl's bucket locked down even if someone loosened it
    calls.append(AwsCall("s3", "PutBucketEncryption", {"Bucket": bucket, "ServerSideEncryptionConfiguration": {
        "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}, "BucketKeyEnabled": True}]},
        **owner(account)}, region, why="encrypt objects at rest by default"))
    calls.append(AwsCall("s3", "PutPublicAccessBlock", {"Bucket": bucket, "PublicAccessBlockConfiguration": {
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True,
        "RestrictPublicBuckets": True}, **owner(account)}, region, why="block every form of public access"))
    calls += lifecycle_calls(s3, bucket, account, region, exists)
    return bucket, calls


# A failed or interrupted multipart upload (a checkpoint cut short by a Spot reclaim) keeps its parts, billed,
# until it is aborted: S3 User Guide, "Configuring a bucket lifecycle configuration to delete incomplete
# multipart uploads". A week leaves every live upload alone.
ABORT_RULE_ID = "trainctl-abort-incomplete-multipart-uploads"
ABORT_AFTER_DAYS = 7


def _aborts_everywhere(rule: dict) -> bool:
    scope = rule.get("Filter") or {}
    return (rule.get("Status") == "Enabled" and bool(rule.get("AbortIncompleteMultipartUpload"))
            and not rule.get("Prefix") and not scope.get("Prefix") and set(scope) <= {"Prefix"})


def lifecycle_calls(s3, bucket: str, account: str, region: str, exists: bool) -> list[AwsCall]:
    """trainctl's bucket aborts incomplete multipart uploads; the bucket's other rules are kept (a put replaces
    the whole configuration)."""
    rules: list[dict] = []
    if exists:
        try:
            rules = s3.get_bucket_lifecycle_configuration(Bucket=bucket, **owner(account)).get("Rules", [])
        except Exception as e:  # noqa: BLE001
            if aws.error_code(e) != "NoSuchLifecycleConfiguration":
                raise TrainctlError(f"job bucket {bucket}: reading its lifecycle rules: {aws.error_summary(e)}") from None
    if any(_aborts_everywhere(r) for r in rules):
        return []
    ours = {"ID": ABORT_RULE_ID, "Status": "Enabled", "Filter": {"Prefix": ""},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": ABORT_AFTER_DAYS}}
    return [AwsCall("s3", "PutBucketLifecycleConfiguration", {
        "Bucket": bucket, "LifecycleConfiguration": {"Rules": [*rules, ours]}, **owner(account)}, region,
        why=f"abort uploads left incomplete {ABORT_AFTER_DAYS} days")]


def checksum(sha256_hex: str) -> str:
    """S3's ChecksumSHA256: the base64 of the digest."""
    return base64.b64encode(binascii.unhexlify(sha256_hex)).decode()


def code_calls(s3, bucket: str, account: str, pkg, job_id: str, region: str, why: str) -> tuple[str, list[AwsCall]]:
    """(the code's key, the upload call unless the very same bytes are already there)."""
    key = code_key(pkg.sha256)
    return key, object_calls(s3, bucket, account, key, pkg.data, pkg.sha256, job_id, region, why)


def object_calls(s3, bucket: str, account: str, key: str, data: bytes, sha256: str, job_id: str, region: str,
                 why: str) -> list[AwsCall]:
    """The upload of a content-addressed tar.gz (its key names its sha256), unless the very same bytes are
    already at the key (S3 returns the checksum it verified on upload)."""
    try:
        head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED", **owner(account))
        if head.get("ChecksumSHA256") == checksum(sha256):
            return []
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) not in (*MISSING, "NoSuchKey"):
            raise TrainctlError(f"s3://{bucket}/{key}: {aws.error_summary(e)}") from None
    return [AwsCall("s3", "PutObject", {
        "Bucket": bucket, "Key": key, "Body": data, "ChecksumAlgorithm": "SHA256",
        "ChecksumSHA256": checksum(sha256),
        "ServerSideEncryption": "AES256", "ContentType": "application/gzip",
        "Tagging": f"{JOB_TAG}={urllib.parse.quote(job_id)}", "Metadata": {"sha256": sha256},
        **owner(account)}, region, why=why)]
