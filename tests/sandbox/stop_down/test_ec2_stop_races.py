"""`trainctl down` and `stop` against a `watch --recover` running beside them: the job is
marked stopped before any instance goes, and recovery reads that mark right before and after each fleet it
makes, so it never brings back a job that someone is taking down. Faults and timing come from botocore event
hooks on the clients trainctl uses, never from replacing trainctl's functions."""
from __future__ import annotations

import pytest

from tests.support.ec2_jobs import JOB, REGION, job_bucket, live, set_capacity, stop_mark
from trainctl.aws import clients as aws


def test_down_marks_the_job_stopped_before_it_terminates_a_node(launched):
    sb, backend, out = launched
    seen: list[bool] = []
    events = aws.client("ec2", REGION).meta.events
    record = lambda **_: seen.append(stop_mark(sb))  # noqa: E731
    events.register("before-call.ec2.TerminateInstances", record)
    try:
        backend.cleanup(JOB, REGION)
    finally:
        events.unregister("before-call.ec2.TerminateInstances", record)
    assert seen and all(seen), "an instance was terminated before the job carried its stop mark"


def test_recovery_launches_nothing_when_down_comes_during_it(launched):
    sb, backend, out = launched
    sb.admin.action("reclaim_spot_instances", job=JOB, instance_ids=[out["instance_ids"][1]])
    # `down` arrives after recovery's describe (which saw the job Interrupted) and before its fleet.
    events = aws.client("ec2", REGION).meta.events
    fleets: list[str] = []

    def down_arrives(**_):
        if not fleets:
            fleets.append("down")
            backend.stop(JOB, REGION, grace_s=0)  # no agent runs here to stop the nodes itself

    events.register("after-call.ec2.DescribeSecurityGroups", down_arrives)
    try:
        result = backend.recover(JOB, REGION)
    finally:
        events.unregister("after-call.ec2.DescribeSecurityGroups", down_arrives)
    assert fleets == ["down"]
    assert result["launched"] == []
    assert live(sb) == []


def test_recovery_ends_its_own_fleet_when_the_stop_mark_came_while_it_was_made(launched):
    sb, backend, out = launched
    sb.admin.action("reclaim_spot_instances", job=JOB, instance_ids=[out["instance_ids"][1]])
    events = aws.client("ec2", REGION).meta.events
    calls: list[str] = []

    def down_during_create_fleet(**_):
        calls.append("CreateFleet")
        if len(calls) == 1:  # `down` listed the instances before this fleet's existed: only the mark is left
            sb.client("s3").put_object(Bucket=job_bucket(sb), Key=f"{JOB}/status/stopped", Body=b"down")

    events.register("after-call.ec2.CreateFleet", down_during_create_fleet)
    try:
        result = backend.recover(JOB, REGION)
    finally:
        events.unregister("after-call.ec2.CreateFleet", down_during_create_fleet)
    assert calls == ["CreateFleet"] and result["launched"] == []
    survivors = {i["InstanceId"] for i in live(sb)}
    assert survivors <= {out["instance_ids"][0]}, "the fleet made after the stop mark is still running"


# ----------------------------------------------------------------------------- recovery ClientTokens (item 11)
def test_a_recovery_refused_for_capacity_is_not_replayed_by_the_next_attempt(launched):
    import pytest

    from trainctl.backends.base import CapacityError

    sb, backend, out = launched
    sb.admin.action("reclaim_spot_instances", job=JOB, instance_ids=[out["instance_ids"][1]])
    set_capacity(sb, False)
    with pytest.raises(CapacityError):
        backend.recover(JOB, REGION)
    set_capacity(sb, True)  # capacity is back: the next poll of `watch --recover` must get it, not EC2's replay
    result = backend.recover(JOB, REGION)  # the first attempt gave the survivor back to move: both come back
    assert result["launched"] and len(live(sb)) == 2


def test_two_recoveries_at_once_make_one_fleet(launched):
    sb, backend, out = launched
    sb.admin.action("reclaim_spot_instances", job=JOB, instance_ids=[out["instance_ids"][1]])
    events = aws.client("ec2", REGION).meta.events
    inner: list[dict] = []

    def second_watch(**_):
        if not inner:  # another `watch --recover` reaches CreateFleet while this one is on its way there
            inner.append({})
            inner[0] = backend.recover(JOB, REGION)

    events.register("before-call.ec2.CreateFleet", second_watch)
    try:
        outer = backend.recover(JOB, REGION)
    finally:
        events.unregister("before-call.ec2.CreateFleet", second_watch)
    assert len(live(sb)) == 2, "two fleets for one lost node"
    # the outer one holds the loss's relaunch claim (issue 36, item 5): the inner one launches nothing
    assert outer["launched"] and inner[0]["launched"] == [] and inner[0]["held_elsewhere"]


def test_recovery_racing_down_stops_quietly_when_the_launch_template_is_gone(launched):
    sb, backend, out = launched
    sb.admin.action("reclaim_spot_instances", job=JOB, instance_ids=[out["instance_ids"][1]])
    events = aws.client("ec2", REGION).meta.events
    said: list[str] = []
    downs: list[str] = []

    def down_arrives(**_):  # `down` runs between recovery's checks and its fleet: the template is gone
        if not downs:
            downs.append("down")
            backend.cleanup(JOB, REGION)

    events.register("before-call.ec2.CreateFleet", down_arrives)
    try:
        result = backend.recover(JOB, REGION, said.append)
    finally:
        events.unregister("before-call.ec2.CreateFleet", down_arrives)
    assert downs == ["down"] and result["launched"] == [] and result.get("stopped") is True, said
    assert said[-1] == f"{JOB} is marked stopped and its resources are going; launching nothing"


def test_down_waits_out_a_describe_that_still_says_pending_after_terminate(launched):
    """EC2's DescribeInstances is eventually consistent: right after TerminateInstances it may still answer
    `pending`. botocore's `instance_terminated` waiter takes that for a failure; `down` waits on."""
    sb, backend, out = launched
    events = aws.client("ec2", REGION).meta.events
    terminated: list[bool] = []
    stale = {"left": 2}  # the first two answers after TerminateInstances are stale

    def seen_terminate(**_):
        terminated.append(True)

    def stale_answer(parsed, **_):
        if terminated and stale["left"] > 0:
            stale["left"] -= 1
            for r in parsed.get("Reservations", []):
                for i in r["Instances"]:
                    i["State"] = {"Code": 0, "Name": "pending"}

    events.register("after-call.ec2.TerminateInstances", seen_terminate)
    events.register("after-call.ec2.DescribeInstances", stale_answer)
    try:
        removed = backend.cleanup(JOB, REGION)
    finally:
        events.unregister("after-call.ec2.TerminateInstances", seen_terminate)
        events.unregister("after-call.ec2.DescribeInstances", stale_answer)
    assert stale["left"] == 0, "the stale answers were never asked for"
    assert any(r.startswith("launch template ") for r in removed), removed
    assert live(sb) == []


def test_down_whose_wait_for_the_instances_fails_still_removes_the_launch_template_and_says_what_is_left(launched):
    """The wait for the terminated instances fails (here EC2 refuses the describe after TerminateInstances):
    what needs no wait (the launch template, whose nodes are ending) goes anyway; the error names what went and
    what to run, and a second `down` removes the rest."""
    from types import SimpleNamespace

    from trainctl.errors import TrainctlError

    sb, backend, out = launched
    events = aws.client("ec2", REGION).meta.events
    terminated: list[bool] = []
    seen_terminate = lambda **_: terminated.append(True)  # noqa: E731
    refused = {"Error": {"Code": "UnauthorizedOperation", "Message": "You are not authorized to perform this "
                         "operation."}, "ResponseMetadata": {"HTTPStatusCode": 403}}
    refuse_after_terminate = lambda **_: (SimpleNamespace(status_code=403), refused) if terminated else None  # noqa: E731
    events.register("after-call.ec2.TerminateInstances", seen_terminate)
    events.register("before-call.ec2.DescribeInstances", refuse_after_terminate)
    try:
        with pytest.raises(TrainctlError) as said:
            backend.cleanup(JOB, REGION)
    finally:
        events.unregister("after-call.ec2.TerminateInstances", seen_terminate)
        events.unregister("before-call.ec2.DescribeInstances", refuse_after_terminate)
    assert "launch template" in str(said.value) and "UnauthorizedOperation" in str(said.value)
    assert f"trainctl down {JOB}" in str(said.value)
    ec2 = sb.client("ec2", REGION)
    tag = [{"Name": "tag:trainctl:job", "Values": [JOB]}]
    assert ec2.describe_launch_templates(Filters=tag)["LaunchTemplates"] == []
    assert ec2.describe_security_groups(Filters=tag)["SecurityGroups"]  # left for the next down
    backend.cleanup(JOB, REGION)
    assert ec2.describe_security_groups(Filters=tag)["SecurityGroups"] == [] and live(sb) == []
