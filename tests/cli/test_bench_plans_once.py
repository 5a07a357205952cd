"""bench plans once: a bench job's spec (one layout of the plan, its workload cut) is planned from the first
plan's quotes (usecases/plan.replan), and that plan is the one its spec gets when planned from scratch; the plan
after a bench prices the same quotes again (plan_again)."""
from __future__ import annotations

import pytest

from tests.support.helpers import CONFIGS
from trainctl.usecases.bench.spec import bench_spec_text
from trainctl.usecases.plan import PlanInputs, make_plan, plan_again, plan_from_aws, replan

SPEC = str(CONFIGS / "vit-base-g5.yaml")


@pytest.mark.parametrize("market,platform", [("spot", "ec2"), ("on-demand", "sagemaker")])
def test_a_bench_job_s_plan_from_the_first_plan_s_quotes_is_its_spec_s_plan(tmp_path, market, platform):
    planned = plan_from_aws(PlanInputs(spec_path=SPEC, offline=True))
    option = next(o for o in planned.plan.options if (o.market, o.platform) == (market, platform))
    path = tmp_path / "bench.yaml"
    path.write_text(bench_spec_text(SPEC, option, 20, 10))
    _, again = replan(planned, str(path), platform)
    _, fresh = make_plan(PlanInputs(spec_path=str(path), platform=platform, offline=True))
    assert again == fresh and again.options[0].layout == option.layout


def test_the_plan_after_a_bench_is_the_first_plan_s_quotes_priced_again():
    planned = plan_from_aws(PlanInputs(spec_path=SPEC, offline=True))
    assert plan_again(planned, None) == planned.plan   # nothing measured since: the same answer
