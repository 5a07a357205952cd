"""A job's budget at launch, through the CLI against the sandbox: SageMaker's MaxRuntimeInSeconds is no longer
than the budget's hours at the layout's On-Demand price; an EC2 job's nodes get the budget and their price."""
from __future__ import annotations

import base64
import gzip
import json

from tests.support.helpers import CONFIGS, run_cli
from trainctl.catalog import load_catalog

BUDGET = 3.0


def _spec(tmp_path, budget: float | None) -> str:
    text = (CONFIGS / "vit-base-g5.yaml").read_text().replace("epochs: 10", "epochs: 0.01")  # a run the budget can pay
    if budget is not None:
        text = text.replace("constraints:\n", f"constraints:\n  budget_usd: {budget}\n")
    path = tmp_path / f"budget-{budget}.yaml"
    path.write_text(text)
    return str(path)


def _dry_run(sb, tmp_path, platform: str, layout: str, budget: float | None = BUDGET) -> dict:
    proc = run_cli(["--output", "json", "--region", "us-east-1", "launch", _spec(tmp_path, budget), "--platform",
                    platform, "--layout", layout, "--dry-run"], tmp_path / "home", env=sb.env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_sagemaker_jobs_max_runtime_is_the_budgets_hours_at_the_on_demand_price(sandbox_env, tmp_path):
    def max_runtime(doc: dict) -> int:
        create = next(r for r in doc["requests"] if r["operation"] == "CreateTrainingJob")
        return create["params"]["StoppingCondition"]["MaxRuntimeInSeconds"]

    unbounded = _dry_run(sandbox_env, tmp_path, "sagemaker", "g5.xlarge:1:on-demand", budget=None)
    # a budget the plan accepts, whose hours are fewer than the default bound (twice the expected hours + 30 min)
    budget = round(max(unbounded["option"]["expected_cost_usd"], unbounded["option"]["cost_p90_usd"]) * 1.2, 2)
    hourly = load_catalog().on_demand_price("sagemaker", "us-east-1", "g5.xlarge").usd_per_hour
    assert int(budget / hourly * 3600) < max_runtime(unbounded)
    bounded = _dry_run(sandbox_env, tmp_path, "sagemaker", "g5.xlarge:1:on-demand", budget=budget)
    assert max_runtime(bounded) == int(budget / hourly * 3600)


def test_an_ec2_jobs_nodes_are_told_the_budget_and_their_price(sandbox_env, tmp_path):
    doc = _dry_run(sandbox_env, tmp_path, "ec2", "g5.xlarge:2:spot")
    template = next(r for r in doc["requests"] if r["operation"] == "CreateLaunchTemplate")
    user_data = template["params"]["LaunchTemplateData"]["UserData"]
    text = base64.b64decode(user_data) if isinstance(user_data, str) else b""
    if text[:2] == b"\x1f\x8b":
        text = gzip.decompress(text)
    config = json.loads(text.decode().split("cat > \"$ROOT/config.json\" <<'TRAINCTL_CONFIG'\n")[1]
                        .split("\nTRAINCTL_CONFIG")[0]) if b"TRAINCTL_CONFIG" in text else None
    assert config is not None, text[:400]
    assert config["budget_usd"] == BUDGET
    assert round(config["node_hourly_usd"] * 2, 4) == doc["option"]["hourly_usd"]  # the plan shows 4 decimals


def test_a_flexible_layouts_nodes_are_counted_at_the_dearest_type_the_fleet_may_launch(sandbox_env, tmp_path):
    """Issue 36, item 11 (the CLI's part): the agent counted a flexible layout's nodes at the plan's type
    ($0.589/h) while the fleet could launch a $1.624/h one; each type's price goes in the config, and the one
    price the agent uses is the dearest."""
    doc = _dry_run(sandbox_env, tmp_path, "ec2", "g5:1xA10G:2:spot")
    template = next(r for r in doc["requests"] if r["operation"] == "CreateLaunchTemplate")
    text = base64.b64decode(template["params"]["LaunchTemplateData"]["UserData"])
    if text[:2] == b"\x1f\x8b":
        text = gzip.decompress(text)
    config = json.loads(text.decode().split("cat > \"$ROOT/config.json\" <<'TRAINCTL_CONFIG'\n")[1]
                        .split("\nTRAINCTL_CONFIG")[0])
    types = doc["option"]["instance_types"]
    assert len(types) > 1 and set(config["node_hourly_by_type"]) == set(types)
    catalog = load_catalog()
    dearest = max(types, key=lambda t: catalog.on_demand_price("ec2", "us-east-1", t).usd_per_hour)
    assert config["node_hourly_usd"] == config["node_hourly_by_type"][dearest] == max(
        config["node_hourly_by_type"].values())
    assert config["node_hourly_usd"] >= doc["option"]["hourly_usd"] / 2 - 1e-4  # the plan shows 4 decimals
