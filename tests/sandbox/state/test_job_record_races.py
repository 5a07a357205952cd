"""Two writers of one job record (two people acting on one job at once) never lose each other's write: the
record is created with If-None-Match: * and updated with If-Match on the version read; the sandbox answers a
stale write 412 PreconditionFailed as S3 does, and the loser reads again and applies its change to the winner's
version. The race is made deterministic with a botocore hook: the other writer's whole update runs right before
this writer's PutObject goes out."""
from __future__ import annotations

import json
import time

import pytest

from trainctl.state.documents import JobDocument
from trainctl.plans import Option

BUCKET = "trainctl-123456789012-us-east-1"
ACCOUNT, REGION = "123456789012", "us-east-1"


def _option() -> Option:
    return Option(rank=1, platform="ec2", instance_type="g5.xlarge", count=1, market="spot", region=REGION,
                  accelerators=1, hourly_usd=0.5, throughput_samples_per_s=100.0, throughput_source="model",
                  hours=1.0, expected_cost_usd=0.5)


def _doc(job_id: str) -> JobDocument:
    now = time.time()
    return JobDocument(job_id=job_id, platform="ec2", region=REGION, account=ACCOUNT, spec_path="s.yaml",
                       spec_name="s", spec_text="name: s\n", spec_sha256="0" * 64, model="vit", batch_size=8,
                       option=_option(), launched_by="arn:aws:iam::123456789012:user/alice", launched_at=now,
                       updated_at=now)


@pytest.fixture
def records(sandbox_env):
    from trainctl.aws import clients as aws
    from trainctl.state import account as job_records

    aws.reset_session()
    sandbox_env.client("s3").create_bucket(Bucket=BUCKET)
    yield job_records
    aws.reset_session()


def test_racing_updates_of_one_record_both_land(records):
    from trainctl.aws import clients as aws

    records.create(_doc("race-1"))
    s3 = aws.client("s3", REGION)
    raced = []

    def other_writer_first(params, **_):
        if params.get("IfMatch") and not raced:  # once: the other writer's update lands between read and write
            raced.append(True)
            records.update("race-1", ACCOUNT, REGION, lambda d: {"status": "Stopping", "status_by": "bob"})

    s3.meta.events.register("before-parameter-build.s3.PutObject", other_writer_first)
    try:
        final = records.update("race-1", ACCOUNT, REGION, lambda d: {"platform_ids": {"FleetId": "fleet-1"}})
    finally:
        s3.meta.events.unregister("before-parameter-build.s3.PutObject", other_writer_first)
    assert raced
    assert final.status == "Stopping" and final.platform_ids == {"FleetId": "fleet-1"}
    stored, _ = records.read("race-1", ACCOUNT, REGION)
    assert stored.status == "Stopping" and stored.status_by == "bob" and stored.platform_ids == {"FleetId": "fleet-1"}


def test_a_stale_write_is_refused_by_the_sandbox_as_s3_does(records, sandbox_env):
    from botocore.exceptions import ClientError

    records.create(_doc("race-2"))
    s3 = sandbox_env.client("s3")
    etag = s3.head_object(Bucket=BUCKET, Key="race-2/job.json")["ETag"]
    s3.put_object(Bucket=BUCKET, Key="race-2/job.json", Body=b"{}", IfMatch=etag)
    with pytest.raises(ClientError) as stale:
        s3.put_object(Bucket=BUCKET, Key="race-2/job.json", Body=b"{}", IfMatch=etag)
    assert stale.value.response["Error"]["Code"] == "PreconditionFailed"
    assert stale.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412


def test_a_second_create_of_one_record_is_refused_and_the_first_kept(records, sandbox_env):
    from trainctl.errors import TrainctlError

    records.create(_doc("race-3"))
    with pytest.raises(TrainctlError) as second:
        records.create(_doc("race-3").model_copy(update={"launched_by": "arn:aws:iam::123456789012:user/bob"}))
    assert "already exists" in str(second.value) and "\n" not in str(second.value)
    body = sandbox_env.client("s3").get_object(Bucket=BUCKET, Key="race-3/job.json")["Body"].read()
    assert json.loads(body)["launched_by"].endswith("user/alice")


def test_a_writer_that_keeps_losing_backs_off_with_jitter_and_lands(records):
    """Issue 36, item 14: four writers re-reading at once kept colliding (21 of 80 updates gave up). The loser now
    waits, exponentially longer with full jitter (the jitter source injected: 0.5 here, so the waits are known),
    and lands after nine lost races in a row."""
    from trainctl.aws import clients as aws

    records.create(_doc("race-4"))
    s3 = aws.client("s3", REGION)
    state = {"lost": 0, "busy": False}

    def another_writer_first(params, **_):
        if params.get("IfMatch") and not state["busy"] and state["lost"] < 9:
            state["busy"] = True
            records.update("race-4", ACCOUNT, REGION, lambda d: {"status_by": f"writer-{state['lost']}"},
                           jitter=lambda: 0.0, sleep=lambda s: None)
            state["lost"] += 1
            state["busy"] = False

    waits: list[float] = []
    s3.meta.events.register("before-parameter-build.s3.PutObject", another_writer_first)
    try:
        final = records.update("race-4", ACCOUNT, REGION, lambda d: {"status": "Stopping"}, jitter=lambda: 0.5,
                               sleep=waits.append)
    finally:
        s3.meta.events.unregister("before-parameter-build.s3.PutObject", another_writer_first)
    assert state["lost"] == 9 and final.status == "Stopping" and final.status_by == "writer-8"
    assert waits == [0.05, 0.1, 0.2, 0.4, 0.8, 1.5, 1.5, 1.5, 1.5]


def test_an_update_of_a_record_deleted_meanwhile_is_no_record_not_an_error(records, sandbox_env):
    """S3 answers a PutObject with If-Match on a key that no longer exists 404 NoSuchKey (S3 User Guide,
    conditional writes); a record deleted between the read and the write (`trainctl rm` on another machine) is
    then no record, as a missing one is, not a crash."""
    from trainctl.aws import clients as aws

    records.create(_doc("gone-1"))
    s3 = aws.client("s3", REGION)

    def deleted_first(params, **_):
        if params.get("IfMatch"):
            s3.meta.events.unregister("before-parameter-build.s3.PutObject", deleted_first)
            sandbox_env.client("s3").delete_object(Bucket=BUCKET, Key=records.record_key("gone-1"))  # another machine

    s3.meta.events.register("before-parameter-build.s3.PutObject", deleted_first)
    try:
        assert records.update("gone-1", ACCOUNT, REGION, lambda d: {"status": "Stopping"}) is None
    finally:
        s3.meta.events.unregister("before-parameter-build.s3.PutObject", deleted_first)
    assert records.read("gone-1", ACCOUNT, REGION) is None
