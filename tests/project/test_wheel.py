"""The product wheel as a user installs it: no sandbox code in it, its data files present, and without
the sandbox distribution `trainctl sandbox ...` and `--sandbox` say in one line how to add it.

The wheel is built from a copy of the source tree (a stale build/ folder in the checkout must not leak
into it) with the running interpreter's setuptools, and installed into a fresh venv that sees every
package of this environment except trainctl's own distributions.
"""
from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.helpers import CONFIGS, ROOT, clean_env
from trainctl_sandbox.testing import add_nat

# Not part of a source tree: environments, caches, build outputs.
SOURCE_IGNORE = shutil.ignore_patterns(".git", ".venv*", ".xla-venv", "build", "dist", "*.egg-info", "__pycache__",
                                       ".pytest_cache", ".hypothesis", ".trainctl", ".whl")
MOTO_IMPORT = re.compile(r"^\s*(?:import\s+moto\b|from\s+moto\b)", re.MULTILINE)
REQUIRED_FILES = ("trainctl/bootstrap/userdata.sh", "trainctl/catalog/catalog.json",
                  "trainctl/catalog/calibration.json", "trainctl/catalog/calibration_fit.json",
                  "trainctl/catalog/spot_hazard.json", "trainctl/entrypoints/requirements.txt",
                  "trainctl/entrypoints/train_lm.py", "trainctl/backends/sagemaker/platform.toml",
                  "trainctl/backends/sagemaker/iam_calls.toml", "trainctl/backends/ec2/platform.toml",
                  "trainctl/backends/ec2/iam_calls.toml", "trainctl/backends/template/platform.toml.example")


def wheel_problems(wheel: Path) -> list[str]:
    """What is wrong with a product wheel: sandbox code in it, or a data file missing from it."""
    problems = []
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        for name in names:
            if name.startswith("trainctl_sandbox") or "sandbox/" in name:
                problems.append(f"{name}: sandbox code")
            elif name.endswith(".py") and MOTO_IMPORT.search(archive.read(name).decode("utf-8", "replace")):
                problems.append(f"{name}: imports moto")
    problems += [f"{name}: missing" for name in REQUIRED_FILES if name not in names]
    return problems


@pytest.fixture(scope="module")
def product_wheel(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("wheel")
    source = base / "src"
    shutil.copytree(ROOT, source, ignore=SOURCE_IGNORE)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                    "-q", "-w", str(base / "out"), str(source)], check=True, capture_output=True, text=True)
    (wheel,) = (base / "out").glob("trainctl-*.whl")
    return wheel


@pytest.fixture(scope="module")
def product_only_venv(product_wheel, tmp_path_factory) -> Path:
    """A venv with the product wheel installed and every other package of this environment, minus
    trainctl's own distributions (so no trainctl-sandbox, and no editable trainctl)."""
    base = tmp_path_factory.mktemp("product-only")
    venv, deps = base / "venv", base / "deps"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    deps.mkdir()
    for site_dir in (Path(p) for p in sys.path if Path(p).name in ("site-packages", "dist-packages")):
        for entry in site_dir.iterdir():
            name = entry.name.lower()
            if name.startswith(("trainctl", "__editable__")) or name.endswith(".pth") or (deps / entry.name).exists():
                continue
            (deps / entry.name).symlink_to(entry)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    (Path(purelib) / "deps.pth").write_text(f"{deps}\n")
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(product_wheel)],
                   check=True, capture_output=True, text=True)
    return venv


def test_product_wheel_has_no_sandbox_code_and_its_data_files(product_wheel):
    assert wheel_problems(product_wheel) == []


def test_wheel_check_finds_sandbox_code_and_missing_data(tmp_path):
    """The check above can fail: a wheel with the sandbox in it and no user data."""
    bad = tmp_path / "trainctl-0.0.0-py3-none-any.whl"
    with zipfile.ZipFile(bad, "w") as archive:
        archive.writestr("trainctl/__init__.py", "")
        archive.writestr("trainctl/sandbox/server.py", "")
        archive.writestr("trainctl_sandbox/cli.py", "")
        archive.writestr("trainctl/fake_aws.py", "import json\nfrom moto import mock_aws\n")
        for name in REQUIRED_FILES:
            if name != "trainctl/bootstrap/userdata.sh":
                archive.writestr(name, "")
    assert wheel_problems(bad) == ["trainctl/sandbox/server.py: sandbox code", "trainctl_sandbox/cli.py: sandbox code",
                                   "trainctl/fake_aws.py: imports moto", "trainctl/bootstrap/userdata.sh: missing"]


def _env(home: Path) -> dict[str, str]:
    return {k: v for k, v in clean_env(home).items() if k != "PYTHONPATH"}  # only what the venv installed


def _run(venv: Path, args: list[str], home: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / "trainctl"), *args], cwd=home, env=_env(home), capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("args", [["sandbox", "up"], ["sandbox"], ["sandbox", "status"],
                                  ["--sandbox", "plan", str(CONFIGS / "vit-base-g5.yaml")]])
def test_without_the_sandbox_one_line_says_how_to_add_it(product_only_venv, tmp_path, args):
    proc = _run(product_only_venv, args, tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "trainctl-sandbox package, which is not installed" in lines[0]
    assert "pip install ./sandbox" in lines[0] and "make install" in lines[0]


def test_the_product_alone_plans_and_lists_the_sandbox_command(product_only_venv, tmp_path):
    python = product_only_venv / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('trainctl_sandbox'))"],
                           cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "None"  # the environment really lacks the sandbox
    help_ = _run(product_only_venv, ["--help"], tmp_path)
    assert help_.returncode == 0 and "sandbox" in help_.stdout
    plan = _run(product_only_venv, ["-o", "json", "plan", str(CONFIGS / "vit-base-g5.yaml"), "--offline"], tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.lstrip().startswith("{")


@pytest.mark.parametrize("args", [
    [str(Path(__file__).parents[1] / "support" / "launch_specs" / "tiny-vit-sagemaker.yaml")],
    [str(CONFIGS / "vit-base-g5.yaml"), "--platform", "ec2", "--layout", "g5.xlarge:2:on-demand"],
], ids=["sagemaker", "ec2"])
def test_the_product_alone_dry_runs_a_launch_on_each_platform(product_only_venv, sandbox, tmp_path, args):
    """A launch's dry-run from the installed wheel. It reads AWS (account, bucket, image,
    subnets) and writes nothing; here the AWS it reads is the sandbox's server, over HTTP like AWS itself:
    the wheel's environment holds no sandbox code. The EC2 dry-run renders the user data (userdata.sh)."""
    add_nat(sandbox)  # a multi-node SageMaker job runs in the VPC: its code download and pip need a NAT
    env = {**_env(tmp_path), **sandbox.env}
    proc = subprocess.run([str(product_only_venv / "bin" / "trainctl"), "-o", "json", "launch", *args, "--dry-run"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    operations = [r["operation"] for r in doc["requests"]]
    if doc["platform"] == "ec2":
        template = next(r for r in doc["requests"] if r["operation"] == "CreateLaunchTemplate")
        user_data = base64.b64decode(template["params"]["LaunchTemplateData"]["UserData"]).decode()
        assert user_data.startswith("#!") and "trainctl_node" in user_data
        assert "CreateFleet" in operations
    else:
        assert doc["platform"] == "sagemaker" and "CreateTrainingJob" in operations
