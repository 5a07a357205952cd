"""`launch --resume-from JOB` copies the earlier job's checkpoints with S3's managed copy, against the sandbox's S3:
one CopyObject below the multipart threshold, a multipart upload of UploadPartCopy parts above it (a CopyObject
stops at 5 GB). A real checkpoint over 5 GB is too big for a test, so the test lowers the threshold with a boto3
TransferConfig (5 MiB, S3's smallest part) and copies a 6 MiB file: two parts, as S3's multipart ETag ("-2") says."""
from __future__ import annotations

from boto3.s3.transfer import TransferConfig

from trainctl.naming import bucket as layout
from trainctl.usecases.launch import resume

ACCOUNT, REGION = "123456789012", "us-east-1"
MIB = 1 << 20


def test_a_file_above_the_threshold_is_copied_in_parts_and_a_small_one_whole(sandbox_env):
    from trainctl.aws import clients as aws

    aws.reset_session()
    calls: list[str] = []
    aws.session().events.register("before-call.s3", lambda model, **_: calls.append(model.name))
    s3 = sandbox_env.client("s3", REGION)
    bucket = layout.job_bucket(ACCOUNT, REGION)
    s3.create_bucket(Bucket=bucket)
    old = layout.checkpoints_prefix("old-job")
    big, small = bytes(range(256)) * (6 * MIB // 256), b"step 7"
    s3.put_object(Bucket=bucket, Key=f"{old}ckpt-7-rank0.pt", Body=big)
    s3.put_object(Bucket=bucket, Key=f"{old}ckpt-7.done", Body=small)
    found = {"job": "old-job", "bucket": bucket, "account": ACCOUNT, "region": REGION,
             "keys": [f"{old}ckpt-7-rank0.pt", f"{old}ckpt-7.done"]}
    said: list[str] = []
    config = TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB, max_concurrency=1)
    try:
        resume.copier(found, "new-job", ACCOUNT, REGION, said.append, config=config)()
    finally:
        aws.reset_session()
    new = layout.checkpoints_prefix("new-job")
    copied = s3.get_object(Bucket=bucket, Key=f"{new}ckpt-7-rank0.pt")
    assert copied["Body"].read() == big and copied["ETag"].strip('"').endswith("-2")  # 5 MiB + 1 MiB
    marker = s3.get_object(Bucket=bucket, Key=f"{new}ckpt-7.done")
    assert marker["Body"].read() == small and "-" not in marker["ETag"]
    assert calls.count("UploadPartCopy") == 2 and calls.count("CopyObject") == 1, calls
    assert calls.count("CreateMultipartUpload") == calls.count("CompleteMultipartUpload") == 1
    assert said and "2 checkpoint file(s) copied" in said[0]
