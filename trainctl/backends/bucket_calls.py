"""The job bucket, the same for both platforms: trainctl's own bucket (trainctl-ACCOUNT-REGION) is created
when missing and kept locked down (SSE-S3 by default, every public access blocked) on every launch; a
bucket the user gives (--bucket) must exist and is used as it is."""
from __future__ import annotations

from typing import Any

from trainctl import aws
from trainctl.awsinfra.bucket import job_bucket
from trainctl.backends.base import AwsCall, tags
from trainctl.errors import TrainctlError, UsageError

MISSING = ("404", "NoSuchBucket", "NotFound")


def job_bucket_calls(s3, job_id: str, region: str, account: str, given: str | None,
                     notes: list[str]) -> tuple[str, list[AwsCall]]:
    """(bucket name, the calls that make it ready); reads whether it exists, writes nothing."""
    bucket = given or job_bucket(account, region)
    try:
        s3.head_bucket(Bucket=bucket)
        exists = True
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) not in MISSING:
            raise TrainctlError(f"job bucket {bucket}: {aws.error_summary(e)}; pass --bucket with a bucket this "
                                "account owns") from None
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
            job_id, **{"trainctl:shared": "true"})}}, region, why="tag the bucket"))
        notes.append(f"job bucket {bucket} will be created (SSE-S3 encrypted, public access blocked)")
    else:
        notes.append(f"job bucket {bucket} exists")
    # idempotent: keeps trainctl's bucket locked down even if someone loosened it
    calls.append(AwsCall("s3", "PutBucketEncryption", {"Bucket": bucket, "ServerSideEncryptionConfiguration": {
        "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}, "BucketKeyEnabled": True}]}},
        region, why="encrypt objects at rest by default"))
    calls.append(AwsCall("s3", "PutPublicAccessBlock", {"Bucket": bucket, "PublicAccessBlockConfiguration": {
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True,
        "RestrictPublicBuckets": True}}, region, why="block every form of public access"))
    return bucket, calls
