"""The sandbox's S3 as its own extensions reach it: moto's in-process backend (the same data the HTTP API
serves), for SageMaker's channels and outputs and for the FSx for Lustre file systems EC2 nodes mount."""
from __future__ import annotations


def parse_s3_uri(uri: str) -> tuple[str, str]:
    rest = uri.split("://", 1)[1]
    bucket, _, key = rest.partition("/")
    return bucket, key


class MotoS3:
    """The sandbox's S3, through moto's in-process backend (same data the HTTP API serves)."""

    def __init__(self, account_id: str, region: str):
        from moto.s3.models import s3_backends
        from moto.utilities.utils import get_partition

        self.backend = s3_backends[account_id][get_partition(region)]

    def get(self, bucket: str, key: str) -> bytes:
        obj = self.backend.get_object(bucket, key)  # raises MissingBucket for an unknown bucket
        if obj is None or not hasattr(obj, "value"):
            raise FileNotFoundError(f"s3://{bucket}/{key}: NoSuchKey")
        return obj.value

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.backend.put_object(bucket, key, data)

    def keys(self, bucket: str, prefix: str) -> list[str]:
        b = self.backend.get_bucket(bucket)
        return sorted(k for k in list(b.keys.keys()) if k.startswith(prefix))


def s3_error(exc: Exception) -> str:
    code = getattr(exc, "code", None) or type(exc).__name__
    return f"{code}: {exc}" if str(exc) else str(code)
