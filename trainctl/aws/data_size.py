"""Measure the job's S3 input channels for the plan: the prefix's size and object count (ListObjectsV2, every page,
Size summed) and the bucket's Region (HeadBucket's BucketRegion). A channel that cannot be read becomes a warning
saying how to give its size instead; the plan then says that channel's data was not priced.
"""
from __future__ import annotations

from trainctl.aws import clients as aws
from trainctl.planner.data_terms import ChannelFacts
from trainctl.spec.data import S3Channel

# A prefix with more objects than this is not listed to its end by `plan` (1,000 keys per page: 100 pages, a few
# seconds); the plan then asks for size_gb rather than price a part of the data as the whole.
MAX_LISTED_OBJECTS = 100_000


def measure_channels(spec, region: str) -> tuple[dict[str, ChannelFacts], list[str]]:
    """(facts per S3 channel, warnings). A channel with size_gb given is not listed (its Region still is asked)."""
    facts: dict[str, ChannelFacts] = {}
    warnings: list[str] = []
    for name, ch in (spec.data or {}).items():
        if not isinstance(ch, S3Channel):
            continue
        try:
            bucket_region = _bucket_region(ch.bucket, region)
            if ch.size_gb:
                facts[name] = ChannelFacts(region=bucket_region, source="given")
                continue
            size, objects = _prefix_size(ch.bucket, ch.prefix, bucket_region or region)
        except Exception as e:  # noqa: BLE001 - any refusal becomes one warning; the plan goes on without the size
            where = f"s3://{ch.bucket}/{ch.prefix} ({aws.error_summary(e)})"
            warnings.append(f"data.{name}: could not read the Region of {where}; cross-Region transfer is not priced"
                            if ch.size_gb else
                            f"data.{name}: could not measure {where}; its data is not priced: give "
                            f"data.{name}.size_gb, or allow s3:ListBucket on the bucket")
            continue
        if objects is None:
            warnings.append(f"data.{name}: s3://{ch.bucket}/{ch.prefix} holds more than {MAX_LISTED_OBJECTS:,} objects; "
                            f"its data is not priced: give data.{name}.size_gb")
            facts[name] = ChannelFacts(region=bucket_region, source="measured")
            continue
        if objects == 0:
            warnings.append(f"data.{name}: s3://{ch.bucket}/{ch.prefix} is empty; a launch would be refused")
        facts[name] = ChannelFacts(size_bytes=float(size), objects=objects, region=bucket_region, source="measured")
    return facts, warnings


def _bucket_region(bucket: str, region: str) -> str | None:
    """The bucket's Region from HeadBucket (S3 API Reference, HeadBucket: BucketRegion, x-amz-bucket-region)."""
    resp = aws.client("s3", region).head_bucket(Bucket=bucket)
    return resp.get("BucketRegion") or resp.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get(
        "x-amz-bucket-region")


def _prefix_size(bucket: str, prefix: str, region: str) -> tuple[int, int | None]:
    """(bytes, objects) under the prefix; objects None when there are more than MAX_LISTED_OBJECTS."""
    pages = aws.client("s3", region).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    size = objects = 0
    for page in pages:
        for obj in page.get("Contents", ()):
            size += obj["Size"]
            objects += 1
        if objects > MAX_LISTED_OBJECTS:
            return size, None
    return size, objects
