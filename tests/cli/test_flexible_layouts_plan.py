"""Flexible layouts in the plan, offline: N identical nodes of any of several types with the same accelerators,
priced on their worst type, every type listed by expected cost; asked for by --layout or the spec."""
from __future__ import annotations

import json

from tests.support.helpers import CONFIGS, run_cli

SPEC = str(CONFIGS / "vit-base-g5.yaml")
ONE_A10G = ["g5.xlarge", "g5.2xlarge", "g5.4xlarge", "g5.8xlarge", "g5.16xlarge"]
EAST = ["--region", "us-east-1"]


def plan(home, *args, env=None) -> dict:
    proc = run_cli(["-o", "json", *EAST, "plan", SPEC, *args], home, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_flexible_option_is_priced_on_its_worst_type_and_lists_every_type(tmp_path):
    home = tmp_path / "home"
    fixed = plan(home, "--offline", "--platform", "ec2", *[a for t in ONE_A10G for a in ("--layout", f"{t}:4:spot")])
    flexible = plan(home, "--offline", "--platform", "ec2", "--layout", "g5:1xA10G:4:spot")["options"]
    assert len(flexible) == 1
    option = flexible[0]
    assert option["flexible_group"] == "g5:1xA10G" and sorted(option["instance_types"]) == sorted(ONE_A10G)
    by_type = {o["instance_type"]: o for o in fixed["options"]}
    worst = max(by_type.values(), key=lambda o: o["expected_cost_usd"])
    assert option["instance_type"] == worst["instance_type"]
    assert option["expected_cost_usd"] == worst["expected_cost_usd"]
    assert option["throughput_samples_per_s"] == worst["throughput_samples_per_s"]
    # priorities: the types by expected cost, lowest first; the cap: the layout on its dearest type at On-Demand
    assert option["instance_types"] == sorted(ONE_A10G, key=lambda t: by_type[t]["expected_cost_usd"])
    on_demand = plan(home, "--offline", "--platform", "ec2",
                     *[a for t in ONE_A10G for a in ("--layout", f"{t}:4:on-demand")])["options"]
    assert option["hourly_cap_usd"] == max(o["hourly_usd"] for o in on_demand)
    assert all(o["instance_types"] == [o["instance_type"]] and o["flexible_group"] is None for o in fixed["options"])
    table = run_cli([*EAST, "plan", SPEC, "--offline", "--platform", "ec2", "--layout", "g5:1xA10G:4:spot"], home,
                    env={"COLUMNS": "200"})
    assert "4x g5:1xA10G" in table.stdout


def test_the_spec_asks_for_flexible_layouts_by_family_or_by_list(tmp_path):
    home = tmp_path / "home"
    text = (CONFIGS / "vit-base-g5.yaml").read_text()
    spec = tmp_path / "flex.yaml"
    spec.write_text(text.replace("  families: [g5]\n", "  families: [g5]\n  flexible: true\n"))
    doc = json.loads(run_cli(["-o", "json", *EAST, "plan", str(spec), "--offline"], home).stdout)
    assert {o["flexible_group"] for o in doc["options"]} >= {"g5:1xA10G", "g5:4xA10G", None}
    spec.write_text(text.replace("  families: [g5]\n", "  families: [g5]\n  flexible: [[g5.4xlarge, g5.8xlarge]]\n"))
    doc = json.loads(run_cli(["-o", "json", *EAST, "plan", str(spec), "--offline"], home).stdout)
    assert {o["flexible_group"] for o in doc["options"]} == {"g5.4xlarge|g5.8xlarge", None}
    spec.write_text(text.replace("  families: [g5]\n", "  families: [g5]\n  flexible: [[g5.4xlarge, g5.12xlarge]]\n"))
    bad = run_cli([*EAST, "plan", str(spec), "--offline"], home)
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1
    assert "candidates.flexible.0" in bad.stderr and "different accelerators" in bad.stderr


def test_a_saved_flexible_plan_names_only_types_the_catalog_knows(tmp_path):
    home = tmp_path / "home"
    doc = plan(home, "--offline", "--platform", "ec2", "--layout", "g5:1xA10G:4:spot")
    doc["options"][0]["instance_types"].append("x9.big")
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    proc = run_cli(["launch", SPEC, "--dry-run", "--plan", str(tmp_path / "plan.json")], home, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "options.0.instance_types 'x9.big' is not in the catalog" in proc.stderr
