"""The bundled catalog: dated, sourced, and agreeing with the reference data it was built from."""
from __future__ import annotations

import csv

import pytest

from tests.support.helpers import ROOT, run_cli, run_json
from trainctl.catalog import load_catalog

FAMILIES = {"g5", "g6", "p3", "p3dn", "p4d", "p5", "trn1", "trn1n"}


def test_families_and_date():
    cat = load_catalog()
    assert set(cat.families) == FAMILIES
    assert cat.date == "2026-11-23"
    assert {"us-east-1", "us-west-2"} <= set(cat.priced_regions)


def test_every_number_has_a_source():
    cat = load_catalog()
    for name, inst in cat.instances.items():
        assert inst.sources, name
        for key in inst.sources.split("; "):
            assert key in cat.sources, (name, key)
    for region, prices in cat.data["on_demand_usd_per_hour"].items():
        for itype, entry in prices.items():
            assert entry["ec2_source"] in cat.sources
            if "sagemaker" in entry:
                assert entry["sagemaker_source"].split(" ")[0] in cat.sources
    for acc in cat.data["accelerators"].values():
        assert set(acc["sources"]) == {"peak_tflops", "efficiency", "intra_node_gbytes_s"}


def test_matches_reference_sources():
    """catalog.json is generated from scripts/catalog_sources: the build must be reproducible."""
    cat = load_catalog()
    with open(ROOT / "scripts/catalog_sources/instances.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(cat.instances)
    for row in rows:
        inst = cat.instances[row["instance"]]
        assert inst.accelerator_count == int(row["accel_count"])
        assert inst.vcpus == int(row["vcpus"])
        price = cat.on_demand_price("ec2", "us-east-1", row["instance"])
        assert price.usd_per_hour == pytest.approx(float(row["ec2_od_usd_hr_us_east_1"].split()[0]))


def test_known_facts():
    cat = load_catalog()
    # After the June 2025 price cut.
    assert cat.on_demand_price("ec2", "us-east-1", "p4d.24xlarge").usd_per_hour == pytest.approx(21.957642)
    assert cat.on_demand_price("ec2", "us-east-1", "p5.48xlarge").usd_per_hour == pytest.approx(55.04)
    g52 = cat.instance("ml.g5.2xlarge")
    assert (g52.network_gbps_baseline, g52.network_gbps_burst, g52.efa) == (5.0, 10.0, False)
    assert cat.instance("p4d.24xlarge").efa_interfaces == 4
    assert cat.instance("trn1.32xlarge").efa_interfaces == 8
    assert cat.instance("trn1.32xlarge").accelerator_count == 16
    adv = cat.spot_advice("us-east-1", "g5.2xlarge")
    assert (adv.savings_pct, adv.interruption_band) == (58, "15-20%")
    assert cat.spot_advice("us-east-1", "g5.4xlarge").interruption_band == "10-15%"
    assert cat.accelerators["A10G"].peak_tflops["bf16"] == 70
    assert not cat.accelerators["V100"].supports("bf16")
    assert cat.ec2_quota("g5.2xlarge", "spot") == ("L-3819A6DF", "All G and VT Spot Instance Requests")
    assert cat.ec2_quota("trn1.32xlarge", "on-demand")[0] == "L-2C3B7624"


def test_build_is_reproducible(tmp_path):
    import json
    import subprocess
    import sys

    before = (ROOT / "trainctl/catalog/catalog.json").read_text()
    subprocess.run([sys.executable, str(ROOT / "scripts/build_catalog.py")], check=True, capture_output=True)
    after = (ROOT / "trainctl/catalog/catalog.json").read_text()
    assert json.loads(before) == json.loads(after)


def test_catalog_command(tmp_path):
    doc = run_json(["catalog", "g5.12"], tmp_path)
    assert [r["instance_type"] for r in doc["instances"]] == ["g5.12xlarge"]
    row = doc["instances"][0]
    assert row["ec2_usd_per_hour"] == 5.672 and row["accelerator_count"] == 4
    assert row["price_sources"]["ec2"] == "KP"
    table = run_cli(["catalog", "trn1"], tmp_path)
    assert table.returncode == 0 and "trn1.32xlarge" in table.stdout and "Sources:" in table.stdout
    bad = run_cli(["catalog", "zz"], tmp_path)
    assert bad.returncode == 2 and "no instance type matches" in bad.stderr


# ----------------------------------------------------------------------------- calibration table
def test_every_calibration_row_names_its_source_and_conditions():
    from trainctl.catalog import load_calibration

    cal = load_calibration()
    assert len(cal.rows) >= 40
    cat = load_catalog()
    for row in cal.rows:
        assert row.source in cal.sources and "http" in cal.sources[row.source], row.id
        assert row.conditions and row.samples_per_s > 0 and row.micro_batch > 0, row.id
        assert row.model in cal.shapes, row.id
        spec = cal.device(row.device)
        assert spec is not None and (spec.peak_tflops or row.device in cat.accelerators), row.id
        assert spec.source in cal.sources, row.id
        assert row.scaling_base is None or any(r.id == row.scaling_base for r in cal.rows), row.id
    assert len({r.id for r in cal.rows}) == len(cal.rows)
    # every catalog accelerator has a memory bandwidth and a die group for the throughput model
    assert set(cat.accelerators) <= set(cal.devices)


def test_model_accuracy_report_is_up_to_date():
    """docs/model-accuracy.md and the band in calibration_fit.json are what scripts/eval_model.py writes now."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("eval_model", ROOT / "scripts" / "eval_model.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["eval_model"] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        assert module.main(["--check"]) == 0
    finally:
        del sys.modules["eval_model"]
