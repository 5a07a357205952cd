"""A new backend edits no file outside `trainctl/backends/` (docs/adding-a-backend.md): in a copy of the package, a
third folder made of the template's data files alone (a made-up platform "batch") is a platform the spec, the
schema, the CLI's help and `trainctl iam-policy` know, with its own rows of the IAM table; every other file of the
copy is the same as here. The CLI runs in a subprocess on the copy, as a user meets it."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import CONFIGS, ROOT, clean_env

TEMPLATE = ROOT / "trainctl" / "backends" / "template"


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def with_batch(tmp_path_factory) -> Path:
    """A copy of the package with backends/batch/ holding the template's two data files, filled in."""
    base = tmp_path_factory.mktemp("third-backend")
    shutil.copytree(ROOT / "trainctl", base / "trainctl", ignore=shutil.ignore_patterns("__pycache__"))
    folder = base / "trainctl" / "backends" / "batch"
    folder.mkdir()
    facts = (TEMPLATE / "platform.toml.example").read_text()
    (folder / "platform.toml").write_text(facts.replace('name = "template"', 'name = "batch"')
                                          .replace('title = "Template"', 'title = "Batch"'))
    shutil.copy(TEMPLATE / "iam_calls.toml.example", folder / "iam_calls.toml")
    assert _files(base / "trainctl") - _files(ROOT / "trainctl") == {"backends/batch/platform.toml",
                                                                     "backends/batch/iam_calls.toml"}
    return base


def _cli(package_root: Path, args: list[str], home: Path) -> subprocess.CompletedProcess:
    env = clean_env(home, {"PYTHONPATH": str(package_root), "COLUMNS": "200"})
    env.pop("TRAINCTL_SANDBOX", None)
    return subprocess.run([sys.executable, "-m", "trainctl.cli", *args], cwd=home, env=env, capture_output=True,
                          text=True, timeout=120)


def _spec(home: Path) -> Path:
    spec = home / "job.yaml"
    spec.write_text((CONFIGS / "vit-micro-sandbox.yaml").read_text().replace("platforms: [sagemaker, ec2]",
                                                                            "platforms: [ec2, batch]"))
    return spec


def test_a_backend_folder_alone_makes_a_platform_the_spec_and_the_schema_know(with_batch, tmp_path):
    schema = json.loads(_cli(with_batch, ["schema"], tmp_path).stdout)
    platforms = schema["$defs"]["Candidates"]["properties"]["platforms"]["items"]["enum"]
    assert platforms == ["sagemaker", "ec2", "batch"]   # after the two, as its `order` says
    plan = _cli(with_batch, ["-o", "json", "plan", str(_spec(tmp_path)), "--offline"], tmp_path)
    assert plan.returncode == 0, plan.stderr
    # the spec is read and planned for batch too: its prices are not in the offline catalog's data (a live plan
    # asks the Price List API by its `price_list`), so its layouts are left out with the reason
    doc = json.loads(plan.stdout)
    assert any("no batch On-Demand price" in w for w in doc["warnings"]), doc["warnings"]
    assert doc["options"] and {o["platform"] for o in doc["options"]} == {"ec2"}
    assert "sagemaker, ec2 or batch" in " ".join(_cli(with_batch, ["plan", "--help"], tmp_path).stdout.split())
    # the same spec without the folder: refused in one line that names the platforms there are
    before = _cli(ROOT, ["plan", str(_spec(tmp_path)), "--offline"], tmp_path)
    assert before.returncode == 2 and "candidates.platforms.1': Input should be 'sagemaker' or 'ec2'" in before.stderr


def test_a_backend_folder_brings_its_own_rows_of_the_iam_policy(with_batch, tmp_path):
    def actions(*args: str) -> set[str]:
        proc = _cli(with_batch, ["-o", "json", "iam-policy", *args], tmp_path)
        assert proc.returncode == 0, proc.stderr
        statements = json.loads(proc.stdout)["policy"]["Statement"]
        return {a for st in statements for a in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])}

    batch, every, ec2 = actions("--platform", "batch"), actions(), actions("--platform", "ec2")
    assert {"service:CreateSomething", "service:TagResource", "service:ListSomethings"} <= batch & every
    assert "s3:PutObject" in batch and "sagemaker:CreateTrainingJob" not in batch   # the shared rows, not the others'
    assert "service:CreateSomething" not in ec2
