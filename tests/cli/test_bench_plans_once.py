"""bench plans once: a bench job's spec (one layout of the plan, its workload cut) is planned from the first
plan's quotes (usecases/plan.replan), and that plan is the one its spec gets when planned from scratch; the plan
after a bench prices the same quotes again (plan_again)."""
from __future__ import annotations

import pytest

from tests.support.helpers import CONFIGS
from trainctl.usecases.bench.spec import bench_spec_text
from trainctl.usecases.plan import PlanInputs, make_plan, pinned, plan_again, plan_from_aws, replan

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


# What a launch's checks and its calls read of the option (backends/: prepare, budget, data, features): the same
# whether the bench job's spec is planned again (replan) or its option is taken as the first plan ranked it (pinned)
LAUNCH_READS = ("platform", "instance_type", "instance_types", "count", "market", "region", "availability_zone",
                "accelerators", "strategy", "micro_batch", "grad_accum", "hourly_usd", "hourly_cap_usd", "volume_gb",
                "capacity_block", "flexible_group")


@pytest.mark.parametrize("config", ["vit-base-g5.yaml", "llm-7b.yaml", "vit-imagenet-data.yaml"])
def test_a_dry_run_bench_launches_the_ranked_option_as_a_plan_of_its_spec_would(tmp_path, config):
    """bench --dry-run plans once: each layout's launch checks take the option the plan ranked (pinned), which
    says what a plan of the bench job's spec would say about where and what to launch."""
    spec = str(CONFIGS / config)
    planned = plan_from_aws(PlanInputs(spec_path=spec, offline=True))
    for option in planned.plan.options[:4]:
        path = tmp_path / f"{option.platform}-{option.rank}.yaml"
        path.write_text(bench_spec_text(spec, option, 20, 10))
        spec_again, again = replan(planned, str(path), option.platform)
        spec_pinned, plan_pinned = pinned(planned, str(path), option)
        assert spec_pinned == spec_again and plan_pinned.options == (option,)
        got, want = plan_pinned.options[0], again.options[0]
        assert {f: getattr(got, f) for f in LAUNCH_READS} == {f: getattr(want, f) for f in LAUNCH_READS}
        assert (got.data and got.data.stream_cap_gbps) == (want.data and want.data.stream_cap_gbps)
