"""`trainctl plan` with a `data:` section, live against the sandbox: the plan measures the prefix itself
(ListObjectsV2, every page) and the bucket's Region (HeadBucket), and prices reading across Regions."""
from __future__ import annotations

from tests.support.data_specs import spec_file
from tests.support.helpers import run_json


def test_a_live_plan_measures_the_prefix_in_the_sandbox(sandbox, tmp_path):
    s3 = sandbox.client("s3", "us-west-2")
    s3.create_bucket(Bucket="my-data-bucket", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    for i in range(30):
        s3.put_object(Bucket="my-data-bucket", Key=f"train/class{i % 3}/img{i:03d}.jpg", Body=b"x" * 1000)
    s3.put_object(Bucket="my-data-bucket", Key="other/ignored.bin", Body=b"y" * 5000)   # outside the prefix
    spec = spec_file(tmp_path, "s3://my-data-bucket/train/", regions=("us-east-1", "us-west-2"))
    doc = run_json(["plan", spec, "--platform", "ec2", "--layout", "g5.12xlarge:1:on-demand"],
                   tmp_path, env={**sandbox.env, "TRAINCTL_CACHE_TTL": "0"})
    assert doc["source"] == "live"
    by_region = {o["region"]: o for o in doc["options"]}
    east, west = by_region["us-east-1"], by_region["us-west-2"]
    assert east["data"]["priced"] and west["data"]["priced"]
    assert any("each node copies 0.0 GB (30 objects)" in w for w in east["why"])
    # the bucket is in us-west-2: only the us-east-1 option reads across Regions, 30 kB at $0.02/GB
    assert west["data"]["egress_usd"] == 0 and east["data"]["egress_usd"] is not None
    assert any("data read from us-west-2 into us-east-1: $0.02/GB inter-Region transfer" in w for w in east["why"])
    assert not any("data read from" in w for w in west["why"])


def test_a_prefix_the_plan_cannot_read_is_one_warning(sandbox, tmp_path):
    spec = spec_file(tmp_path, "s3://no-such-data-bucket/train/")
    doc = run_json(["plan", spec, "--platform", "ec2", "--layout", "g5.12xlarge:1:on-demand"],
                   tmp_path, env={**sandbox.env, "TRAINCTL_CACHE_TTL": "0"})
    (line,) = [w for w in doc["warnings"] if w.startswith("data.train:")]
    assert "could not measure s3://no-such-data-bucket/train/" in line and "give data.train.size_gb" in line
    assert doc["options"][0]["data"]["priced"] is False


def test_a_given_size_is_priced_even_when_the_bucket_cannot_be_read(sandbox, tmp_path):
    spec = spec_file(tmp_path, {"uri": "s3://no-such-data-bucket/train/", "size_gb": 10})
    doc = run_json(["plan", spec, "--platform", "ec2", "--layout", "g5.12xlarge:1:on-demand"],
                   tmp_path, env={**sandbox.env, "TRAINCTL_CACHE_TTL": "0"})
    (line,) = [w for w in doc["warnings"] if w.startswith("data.train:")]
    assert "could not read the Region of s3://no-such-data-bucket/train/" in line
    assert doc["options"][0]["data"]["priced"] and doc["options"][0]["data"]["copy_hours"] > 0
