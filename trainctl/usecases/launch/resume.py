"""`launch --resume-from JOB`: a new job that starts from an earlier job's newest checkpoints.

A job that ended before its work did (stopped at its Capacity Block's end, interrupted with no capacity to come back
to) resumes on another option as a new job: its own id, its own resources, and a copy of the earlier job's
checkpoint folder (JOB/checkpoints/ in the job bucket, the same layout on both platforms) in its own folder before
it starts. Both platforms restore that folder before the training starts (EC2: bootstrap/checkpoints.py; SageMaker:
CheckpointConfig), and the bundled scripts resume from the newest complete checkpoint in it.

Read before anything is created (the earlier job known to this machine, of the same model, with a checkpoint), so a
wrong JOB stops the launch with one line; copied server-side at the job's start, once the bucket exists (the
launch's trace: before_start). A CopyObject copies at most 5 GB (S3 API Reference, CopyObject), and a checkpoint of
a large model is bigger, so the copy is boto3's managed copy: one CopyObject below its multipart threshold, above it
a multipart upload whose parts are UploadPartCopy calls (S3 User Guide, "Copying an object using multipart upload":
up to 5 TB). S3 checks each call's ExpectedBucketOwner; the managed copy takes one owner for both buckets (s3transfer
passes it to the source's HeadObject), so a resume copies only between buckets of the same account.
"""
from __future__ import annotations

from typing import Any, Callable

from trainctl.errors import TrainctlError, UsageError
from trainctl.naming import bucket as layout


def _listing(s3, bucket: str, prefix: str, account: str) -> list[str]:
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix,
                                                             **layout.owner(account)):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys


def checked(store, old_job: str, spec) -> dict:
    """What a resume copies: {"job", "bucket", "account", "region", "keys"}; UsageError when it cannot."""
    from trainctl.aws import clients as aws

    row = store.job(old_job)
    if row is None or not row.region:
        raise UsageError(f"--resume-from {old_job}: no such job on this machine (see `trainctl ls`)")
    if row.model and row.model != spec.model.name:
        raise UsageError(f"--resume-from {old_job}: that job trained {row.model}, this spec trains "
                         f"{spec.model.name}; its checkpoints cannot start this one")
    bucket, prefix = layout.job_bucket(row.account, row.region), layout.checkpoints_prefix(old_job)
    keys = _listing(aws.client("s3", row.region), bucket, prefix, row.account)
    if not keys:
        raise UsageError(f"--resume-from {old_job}: no checkpoint under s3://{bucket}/{prefix}; nothing to resume "
                         "from (launch without --resume-from to start from step 0)")
    return {"job": old_job, "bucket": bucket, "account": row.account, "region": row.region, "keys": keys}


def copier(found: dict, new_job: str, account: str, region: str, say: Callable[[str], None],
           config: Any = None) -> Callable[[], None]:
    """The copy into the new job's checkpoint folder, to run right before the job starts. `config`: a boto3
    TransferConfig; None: boto3's defaults (multipart above 8 MiB in 8 MiB parts, 10 threads), which copy every size
    up to S3's 5 TB object limit with each part within UploadPartCopy's 5 MiB to 5 GiB."""
    def copy() -> None:
        from boto3.s3.transfer import TransferConfig

        from trainctl.aws import clients as aws

        if found["account"] and account and found["account"] != account:
            raise TrainctlError(f"--resume-from {found['job']}: its checkpoints are in account {found['account']}'s "
                                f"bucket s3://{found['bucket']}, this launch runs in account {account}; launch with "
                                "the first account's credentials", exit_code=2)
        s3, target = aws.client("s3", region), layout.job_bucket(account, region)
        source = aws.client("s3", found["region"])  # the HeadObject that sizes the copy asks the source's Region
        old, new = layout.checkpoints_prefix(found["job"]), layout.checkpoints_prefix(new_job)
        for key in found["keys"]:
            s3.copy({"Bucket": found["bucket"], "Key": key}, target, new + key[len(old):],
                    ExtraArgs=layout.owner(account), SourceClient=source, Config=config or TransferConfig())
        say(f"resuming from {found['job']}: {len(found['keys'])} checkpoint file(s) copied from "
            f"s3://{found['bucket']}/{old} to s3://{target}/{new}")
    return copy
