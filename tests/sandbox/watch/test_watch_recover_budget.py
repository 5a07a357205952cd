"""`watch --recover` relaunches within a budget and backs off after refusals for capacity, so a job that keeps
losing its nodes, or finds no capacity, is never relaunched without end (41 instances in 70 s before)."""
from __future__ import annotations

import pytest

from tests.support.ec2_jobs import JOB, REGION, live, set_capacity
from trainctl.aws import clients as aws
from trainctl.errors import TrainctlError
from trainctl.state.job_store import JobStore
from trainctl.usecases.jobs.recovery import RETRY_FIRST_S, Recovery
from trainctl.usecases.jobs.watch import JobRef


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _recovery(backend, tmp_path, clock, said, **more) -> Recovery:
    store = JobStore(tmp_path / "state.db", endpoint="")
    return Recovery(backend, JobRef(JOB, "ec2", REGION, None), store, said.append, clock, **more)


def _fleets(calls: list[str]):
    events = aws.client("ec2", REGION).meta.events
    count = lambda **_: calls.append("CreateFleet")  # noqa: E731
    events.register("before-call.ec2.CreateFleet", count)
    return lambda: events.unregister("before-call.ec2.CreateFleet", count)


def test_after_a_refusal_for_capacity_recovery_waits_before_it_asks_again(launched, tmp_path):
    sb, backend, out = launched
    sb.admin.action("reclaim_spot_instances", job=JOB, instance_ids=[out["instance_ids"][1]])
    set_capacity(sb, False)
    clock, said, calls = Clock(), [], []
    recover = _recovery(backend, tmp_path, clock, said)
    done = _fleets(calls)
    try:
        assert recover(backend.describe(JOB, REGION)) is False
        asked = len(calls)
        assert asked and any(f"trying again in {RETRY_FIRST_S:.0f} s" in line for line in said)
        assert recover(backend.describe(JOB, REGION)) is False and len(calls) == asked  # backing off
        set_capacity(sb, True)
        clock.now += RETRY_FIRST_S
        assert recover(backend.describe(JOB, REGION)) is True and len(calls) > asked
    finally:
        done()
    assert len(live(sb)) == 2


def test_recovery_stops_with_one_line_past_its_budget(launched, tmp_path):
    sb, backend, out = launched
    clock, said = Clock(), []
    recover = _recovery(backend, tmp_path, clock, said, max_recoveries=1)
    sb.admin.action("reclaim_spot_instances", job=JOB, instance_ids=[out["instance_ids"][1]])
    assert recover(backend.describe(JOB, REGION)) is True
    again = next(i["InstanceId"] for i in live(sb) if i["InstanceId"] != out["instance_ids"][0])
    sb.admin.action("reclaim_spot_instances", job=JOB, instance_ids=[again])
    with pytest.raises(TrainctlError) as stopped:
        recover(backend.describe(JOB, REGION))
    message = str(stopped.value)
    assert "\n" not in message and f"stopped recovering {JOB} after 1 relaunches" in message
    assert len(live(sb)) == 1  # nothing launched past the budget
