"""The bundled scripts' stop at a SageMaker training plan's end (trainctl_runtime.py): the end SageMaker gives the
container (SAGEMAKER_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP, epoch ms) becomes a stop 40 minutes before it,
none outside a plan, and a run stopped by it exits non-zero (0 would have SageMaker report it Completed)."""
from __future__ import annotations

from trainctl.entrypoints.trainctl_runtime import (CAPACITY_END, CAPACITY_END_ENV, CAPACITY_END_EXIT,
                                                   CAPACITY_STOP_LEAD_S, StopSignal, capacity_end_at, stopped_exit)


def test_the_plans_end_is_a_stop_forty_minutes_before_it_and_nothing_outside_a_plan():
    assert capacity_end_at({CAPACITY_END_ENV: "1800000000000"}) == 1_800_000_000 - CAPACITY_STOP_LEAD_S
    for outside in ({}, {CAPACITY_END_ENV: "0"}, {CAPACITY_END_ENV: "soon"}):
        assert capacity_end_at(outside) is None


def test_a_plan_already_near_its_end_stops_at_once_and_exits_non_zero(monkeypatch, capsys):
    import time

    monkeypatch.setenv(CAPACITY_END_ENV, str(int(time.time() * 1000)))  # the end is now: the stop is past
    stop = StopSignal().install(())
    for _ in range(200):
        if stop.requested:
            break
        time.sleep(0.01)
    assert stop.signal_name == CAPACITY_END
    assert stopped_exit(stop.signal_name, 0, 7) == CAPACITY_END_EXIT
    out = capsys.readouterr()
    assert "stopped rank=0 step=7 signal=capacity-end exit=3" in out.out and "training plan's end" in out.err
    assert stopped_exit("SIGTERM", 1, 7) == 0   # a Spot notice: the platform resumes the job
