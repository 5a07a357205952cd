"""Which job endings mean "no capacity" (failover moves on) and which do not (failover must not hide them)."""
from __future__ import annotations

from trainctl.backends.base import JobView, Transition
from trainctl.usecases.launch.launch_job import capacity_problem


def view(status, secondary, statuses, reason=None):
    return JobView(job_id="j", platform="sagemaker", region="us-east-1", status=status, secondary_status=secondary,
                   transitions=tuple(Transition(s, 0.0, None) for s in statuses), hosts=("algo-1",),
                   training_seconds=None, billable_seconds=None, interruptions=0, failure_reason=reason)


def test_on_demand_capacity_error_is_a_capacity_problem():
    v = view("Failed", "Failed", ["Starting", "Failed"],
             "CapacityError: Unable to provision requested ML compute capacity (InsufficientInstanceCapacity)")
    assert capacity_problem(v).startswith("CapacityError")


def test_spot_max_wait_before_training_is_a_capacity_problem_but_not_after_it_started():
    assert capacity_problem(view("Stopped", "MaxWaitTimeExceeded", ["Starting", "MaxWaitTimeExceeded"]))
    started = view("Stopped", "MaxWaitTimeExceeded", ["Starting", "Downloading", "Training", "Interrupted",
                                                       "Restarting", "MaxWaitTimeExceeded"])
    assert capacity_problem(started) is None


def test_a_script_error_is_not_a_capacity_problem():
    v = view("Failed", "Failed", ["Starting", "Downloading", "Training", "Failed"],
             "AlgorithmError: ExecuteUserScriptError: exit code 1")
    assert capacity_problem(v) is None
