"""`trainctl plan` as a user and a script meet it: the JSON contract, offline mode, flags, start-up imports."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.support.helpers import ROOT, clean_env, run_cli, run_json
from tests.support.plan_contract import check_contract


def test_offline_json_contract(tmp_path):
    proc = run_cli(["--output", "json", "plan", "configs/vit-base-g5.yaml"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # exactly one JSON document on stdout
    check_contract(doc)
    assert doc["source"] == "offline" and doc["spec"] == "configs/vit-base-g5.yaml"
    assert any("no AWS credentials found" in w for w in doc["warnings"])
    assert doc["options"][0]["expected_cost_usd"] == min(o["expected_cost_usd"] for o in doc["options"])


def test_offline_table_says_so(tmp_path):
    proc = run_cli(["plan", "configs/vit-base-g5.yaml"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "bundled catalog dated" in proc.stdout and "(offline)" in proc.stdout
    assert "expected $" in proc.stdout and "#1" in proc.stdout


def test_layout_flag_and_platform(tmp_path):
    doc = run_json(["plan", "configs/vit-base-g5.yaml", "--offline", "--layout", "g5.12xlarge:1:on-demand",
                    "--layout", "g5.2xlarge:4:spot", "--platform", "sagemaker"], tmp_path)
    assert {(o["instance_type"], o["count"], o["market"]) for o in doc["options"]} == {
        ("g5.12xlarge", 1, "on-demand"), ("g5.2xlarge", 4, "spot")}
    assert {o["platform"] for o in doc["options"]} == {"sagemaker"}
    assert any(w.startswith("--offline") for w in doc["warnings"])


def test_bad_flags_are_one_line(tmp_path):
    for args, needle in ((["--layout", "g5.2xlarge:zero"], "--layout"), (["--layout", "x9.big:2"], "unknown instance"),
                         (["--objective", "fun"], "--objective"), (["--platform", "k8s"], "--platform")):
        proc = run_cli(["plan", "configs/vit-base-g5.yaml", "--offline", *args], tmp_path)
        assert proc.returncode == 2, (args, proc.stderr)
        assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_other_configs_plan(tmp_path):
    for config in ("vit-base-trn1.yaml", "llm-7b.yaml"):
        doc = run_json(["plan", f"configs/{config}", "--offline"], tmp_path)
        check_contract(doc)
        assert doc["options"]


def test_help_and_version_import_neither_boto3_nor_torch(tmp_path):
    code = ("import sys; sys.argv=['trainctl','--help'];\n"
            "from trainctl.cli import main\n"
            "try: main()\n"
            "except SystemExit: pass\n"
            "bad=[m for m in ('boto3','botocore','torch','moto','pydantic','yaml') if m in sys.modules]\n"
            "print('HEAVY', bad)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=clean_env(tmp_path), capture_output=True,
                          text=True)
    assert "HEAVY []" in proc.stdout, proc.stdout + proc.stderr
    version = run_cli(["--version"], tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("trainctl ")


def test_launch_without_credentials_is_one_line(tmp_path):
    proc = run_cli(["launch", "configs/vit-base-g5.yaml", "--offline", "--platform", "sagemaker", "--layout",
                    "g5.2xlarge:1:on-demand", "--yes"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert "no AWS credentials found" in lines[-1] and "--sandbox" in lines[-1]
    assert "Traceback" not in proc.stderr
