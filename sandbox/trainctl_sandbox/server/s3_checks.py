"""S3's server-side checks that moto does not make: ExpectedBucketOwner, and the SHA-256 checksum of an upload.

Every S3 operation that takes ExpectedBucketOwner (the header x-amz-expected-bucket-owner) fails with
403 AccessDenied when the bucket belongs to another account (Amazon S3 User Guide, "Verifying bucket
ownership with bucket owner condition"). The sandbox keeps buckets of several accounts (moto's
`bucket_accounts`; a test creates one for another account with moto's `x-moto-account-id` header), so a
foreign bucket under trainctl's predictable name can be set up and must be refused here.
"""
from __future__ import annotations

import base64
import hashlib

HEADER = "HTTP_X_AMZ_EXPECTED_BUCKET_OWNER"


def bucket_name(environ: dict) -> str | None:
    """The bucket a request addresses: virtual-hosted (`bucket.s3...`) or path-style (`/bucket/key`)."""
    host = environ.get("HTTP_HOST", "").split(":")[0]
    first = host.split(".")[0]
    if "." in host and not host.replace(".", "").isdigit() and first not in ("s3", "localhost") \
            and not first.startswith("s3-"):
        return first
    path = environ.get("PATH_INFO", "/").lstrip("/")
    return path.split("/", 1)[0] or None


def owner_refusal(service: str, environ: dict) -> tuple[str, str, int] | None:
    """(code, message, status) when the request names an owner that is not the bucket's, else None."""
    expected = environ.get(HEADER)
    if service != "s3" or not expected:
        return None
    bucket = bucket_name(environ)
    from moto.s3.models import s3_backends

    found = s3_backends.bucket_accounts.get(bucket) if bucket else None
    if found is None or found[1] == expected:
        return None  # no such bucket: moto answers NoSuchBucket as S3 does
    return "AccessDenied", "Access Denied", 403


def checksum_refusal(service: str, operation: str, environ: dict, body: bytes) -> tuple[str, str, int] | None:
    """PutObject with x-amz-checksum-sha256: S3 computes the body's SHA-256 and refuses a mismatch with
    400 BadDigest (S3 User Guide, "Checking object integrity"). A streamed (aws-chunked) body carries its
    checksum in a trailer, which is not checked here."""
    claimed = environ.get("HTTP_X_AMZ_CHECKSUM_SHA256")
    if service != "s3" or operation != "PutObject" or not claimed or "aws-chunked" in environ.get(
            "HTTP_CONTENT_ENCODING", ""):
        return None
    if base64.b64encode(hashlib.sha256(body).digest()).decode() == claimed:
        return None
    return "BadDigest", "The SHA256 you specified did not match the calculated checksum.", 400


def refusal(call, environ: dict, body: bytes) -> tuple[str, str, int] | None:
    return owner_refusal(call.service, environ) or checksum_refusal(call.service, call.operation, environ, body)
