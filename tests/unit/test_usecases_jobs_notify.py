"""The end message `watch` sends for a job (usecases/jobs/notify.py) names why it ended: a SageMaker job its budget's
MaxRuntime stopped says the budget (issue 35: the end message gave no reason), one stopped otherwise does not."""
from __future__ import annotations

from trainctl.backends.base import JobView
from trainctl.backends.budget import budget_seconds, sagemaker_hourly
from trainctl.state.job_store import JobStore
from trainctl.usecases.jobs.notify import messages, name_the_budget, remember

BUDGET = 2.0


def _ended(secondary: str, max_runtime: int) -> tuple[JobView, dict]:
    view = JobView(job_id="j", platform="sagemaker", region="us-east-1", status="Stopped",
                   secondary_status=secondary, transitions=(), hosts=("algo-1",), training_seconds=60,
                   billable_seconds=60, interruptions=0, failure_reason=None, instance_type="g5.xlarge", count=1,
                   raw={"StoppingCondition": {"MaxRuntimeInSeconds": max_runtime}})
    doc = {"job_id": "j", "status": "Stopped", "secondary_status": secondary, "interruptions": 0, "cost_usd": 1.9,
           "platform": "sagemaker", "failure_reason": None}
    return view, doc


def test_the_end_message_of_a_job_its_budget_stopped_names_the_budget(tmp_path):
    store = JobStore(tmp_path / "state.db", endpoint="")
    remember(store, "j", "https://hooks.example.com/x", BUDGET)
    bound = budget_seconds(BUDGET, sagemaker_hourly("us-east-1", "g5.xlarge", 1))
    view, doc = _ended("MaxRuntimeExceeded", bound)
    name_the_budget(store, view, doc)
    end = dict(messages(doc, BUDGET))["end:Stopped"]
    assert end.startswith("j: Stopped, $1.9000: stopped: budget $2 reached")
    assert f"MaxRuntimeInSeconds {bound}" in end and "\n" not in end


def test_the_end_message_of_a_job_stopped_otherwise_gives_no_budget_reason(tmp_path):
    store = JobStore(tmp_path / "state.db", endpoint="")
    remember(store, "j", "https://hooks.example.com/x", BUDGET)
    bound = budget_seconds(BUDGET, sagemaker_hourly("us-east-1", "g5.xlarge", 1))
    for secondary, limit in (("Stopped", bound), ("MaxRuntimeExceeded", bound + 600)):  # `stop`; the user's limit
        view, doc = _ended(secondary, limit)
        name_the_budget(store, view, doc)
        assert dict(messages(doc, BUDGET))["end:Stopped"] == "j: Stopped, $1.9000"
