"""The budget's bound on a SageMaker job (trainctl/backends/budget.py): MaxRuntimeInSeconds from the budget, and
the job's status naming the budget when that bound stopped it."""
from __future__ import annotations

from trainctl.backends.base import JobView
from trainctl.backends.budget import budget_seconds, sagemaker_hourly, stopped_by_budget


def _view(secondary: str, max_runtime: int) -> JobView:
    return JobView(job_id="j", platform="sagemaker", region="us-east-1", status="Stopped", secondary_status=secondary,
                   transitions=(), hosts=("algo-1",), training_seconds=10, billable_seconds=10, interruptions=0,
                   failure_reason=None, instance_type="g5.xlarge", count=2,
                   raw={"StoppingCondition": {"MaxRuntimeInSeconds": max_runtime}})


def test_a_job_stopped_at_its_budgets_max_runtime_names_the_budget():
    hourly = sagemaker_hourly("us-east-1", "ml.g5.xlarge", 2)
    bound = budget_seconds(5.0, hourly)
    assert bound == int(5.0 / hourly * 3600)
    why = stopped_by_budget(_view("MaxRuntimeExceeded", bound), 5.0)
    assert why is not None and why.startswith("stopped: budget $5 reached")


def test_a_max_runtime_the_budget_did_not_set_is_not_the_budget():
    hourly = sagemaker_hourly("us-east-1", "g5.xlarge", 2)
    assert stopped_by_budget(_view("MaxRuntimeExceeded", budget_seconds(5.0, hourly) + 60), 5.0) is None
    assert stopped_by_budget(_view("Stopped", budget_seconds(5.0, hourly)), 5.0) is None
    assert stopped_by_budget(_view("MaxRuntimeExceeded", budget_seconds(5.0, hourly)), None) is None
