"""The plan table a newcomer can trust: one row per option, rows that never read alike at any width, the wall
hours the deadline is checked on, price sources by name (saying which are not verified against AWS), the nearest
miss when nothing meets the deadline, and offline prices for every region the candidate families are offered in."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.helpers import CONFIGS, ROOT, run_cli, run_json

G5 = str(CONFIGS / "vit-base-g5.yaml")
TRN1 = str(CONFIGS / "vit-base-trn1.yaml")


def _spec(tmp_path, source: str, old: str, new: str) -> str:
    text = open(source).read()
    assert old in text
    path = tmp_path / "spec.yaml"
    path.write_text(text.replace(old, new))
    return str(path)


def test_a_layout_listed_and_also_built_from_the_families_is_one_option(tmp_path):
    # vit-base-g5.yaml lists g5.2xlarge:4:spot in candidates.layouts, and family g5 with 1-4 nodes builds it too
    doc = run_json(["plan", G5, "--offline"], tmp_path)
    keys = [(o["instance_type"], o["count"], o["market"], o["platform"], o["region"]) for o in doc["options"]]
    assert len(keys) == len(set(keys))
    assert ("g5.2xlarge", 4, "spot", "ec2", "us-east-1") in keys


@pytest.mark.parametrize("columns", [80, 100, 200])
def test_rows_never_read_alike_and_show_wall_hours(tmp_path, columns):
    proc = run_cli(["plan", G5, "--offline", "--top", "10"], tmp_path, env={"COLUMNS": str(columns)})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    start = next(i for i, line in enumerate(lines) if line.startswith("┡"))
    rows = [line for line in lines[start + 1:start + 11]]
    assert all(line.startswith("│") for line in rows) and len(set(rows)) == 10
    assert all(("us-east-1" in r or "us-west-2" in r) and ("ec2" in r or "sagemaker" in r) for r in rows)
    header = " ".join(lines[:start])
    assert "wall" in header and "hours" in header and "expected $" in header
    text = " ".join(proc.stdout.split())
    assert "wall hours: from launch to the last step" in text and "the deadline is checked on these" in text


def test_a_p90_below_the_expected_cost_is_explained_under_the_table(tmp_path):
    proc = run_cli(["plan", TRN1, "--offline", "--top", "10"], tmp_path, env={"COLUMNS": "200"})
    doc = run_json(["plan", TRN1, "--offline"], tmp_path)
    below = [o for o in doc["options"][:10] if o["cost_p90_usd"] < o["expected_cost_usd"]]
    assert below, "the trn1 plan has rarely-interrupted options (about 1% of runs)"
    assert all(o["cost_p50_usd"] <= o["cost_p90_usd"] for o in doc["options"])
    text = " ".join(proc.stdout.split())
    assert f"p90 $ below expected $ (#{below[0]['rank']}" in text
    assert all(any(w.startswith("p90 below the expected cost") for w in o["why"]) for o in below)


def test_when_no_option_meets_the_deadline_the_plan_names_the_closest(tmp_path):
    spec = _spec(tmp_path, G5, "deadline_hours: 72", "deadline_hours: 0.2")
    proc = run_cli(["-o", "json", "plan", spec, "--offline"], tmp_path)
    doc = json.loads(proc.stdout)
    assert doc["options"] == []
    line = next(w for w in doc["warnings"] if w.startswith("no option meets the 0.2 h deadline"))
    missed = [float(e["reason"].split(": ")[1].split()[0]) for e in doc["excluded"]
              if e["reason"].startswith("misses the deadline")]
    assert f"{min(missed):.1f} wall hours expected" in line and "on-demand on ec2 in us-east-1" in line


def test_price_sources_are_named_and_say_which_are_not_verified(tmp_path):
    doc = run_json(["plan", G5, "--offline", "--top", "500"], tmp_path)
    sources = {(o["platform"], o["region"]): o["price_source"] for o in doc["options"] if o["market"] == "on-demand"}
    assert "AWS Pricing API" in sources[("ec2", "us-east-1")] and "(KP)" not in sources[("ec2", "us-east-1")]
    assert "AWS's EC2 price list" in sources[("ec2", "us-west-2")]
    assert all("NOT verified against AWS" in sources[("sagemaker", r)] for r in ("us-east-1", "us-west-2"))
    proc = run_cli(["plan", G5, "--offline"], tmp_path, env={"COLUMNS": "200"})
    assert "unverified-price" in proc.stdout


@pytest.mark.parametrize("region", ["eu-central-1", "us-west-2", "ap-northeast-1", "eu-west-1", "ca-central-1"])
def test_offline_plans_price_both_platforms_in_commercial_regions(tmp_path, region):
    spec = _spec(tmp_path, G5, "regions: [us-east-1, us-west-2]", f"regions: [{region}]")
    doc = run_json(["plan", spec, "--offline", "--top", "500"], tmp_path)
    assert {o["platform"] for o in doc["options"]} == {"ec2", "sagemaker"}
    assert {o["region"] for o in doc["options"]} == {region}
    assert not any("no sagemaker On-Demand price" in w for w in doc["warnings"])


def test_the_committed_catalog_is_what_build_catalog_makes_of_its_sources(tmp_path):
    out = tmp_path / "catalog.json"
    proc = subprocess.run([sys.executable, "scripts/build_catalog.py", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text()) == json.loads((ROOT / "trainctl/catalog/catalog.json").read_text())
    catalog = json.loads(out.read_text())
    for region, types in catalog["on_demand_usd_per_hour"].items():
        for itype, entry in types.items():
            assert entry["ec2_source"] in catalog["source_names"], (region, itype)
            if "sagemaker" in entry:
                assert entry["sagemaker_source"].split()[0] in catalog["source_names"], (region, itype)


def test_a_region_that_does_not_offer_a_family_says_so(tmp_path):
    spec = _spec(tmp_path, TRN1, "regions: [us-east-1, us-west-2]", "regions: [eu-central-1]")
    proc = run_cli(["-o", "json", "plan", spec, "--offline"], tmp_path)
    doc = json.loads(proc.stdout)
    assert doc["options"] == []
    assert any("AWS's EC2 price list of 2026-01-21 does not offer them in eu-central-1" in w
               for w in doc["warnings"]), doc["warnings"]
