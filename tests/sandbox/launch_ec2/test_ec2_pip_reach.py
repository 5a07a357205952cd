"""EC2 nodes pip-install a shipped requirements.txt from PyPI, which VPC endpoints do not reach: a launch whose
nodes would have endpoints but no NAT (and no public IPv4) is refused in one line naming the fixes, before anything
is created; a requirements.txt that installs offline or from its own index is the user's word. Through the CLI
against the strict sandbox."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.support.helpers import CONFIGS, run_cli
from trainctl_sandbox.testing import add_endpoints

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "own-script"
P4D = ["--platform", "ec2", "--region", "us-east-1", "--layout", "p4d.24xlarge:2:on-demand"]


def _own_script(tmp_path, requirements: str | None) -> str:
    src = tmp_path / "proj"
    src.mkdir(exist_ok=True)
    shutil.copy(EXAMPLE / "train.py", src / "train.py")
    if requirements is not None:
        (src / "requirements.txt").write_text(requirements)
    text = (EXAMPLE / "job.yaml").read_text().replace("platforms: [sagemaker]", "platforms: [sagemaker, ec2]")
    spec = tmp_path / "job.yaml"
    spec.write_text(text.replace("source_dir: .", "source_dir: proj"))
    return str(spec)


def _launch(sb, tmp_path, spec: str, *args: str):
    return run_cli(["--output", "json", "launch", spec, *args], tmp_path / "home", env=sb.env)


def test_requirements_behind_endpoints_only_are_refused_before_anything_is_created(sandbox_env, tmp_path):
    sb = sandbox_env
    add_endpoints(sb, ("ec2", "logs"), region="us-east-1")   # the agent reaches AWS; nothing reaches PyPI
    proc = _launch(sb, tmp_path, str(CONFIGS / "vit-base-g5.yaml"), *P4D, "--yes")  # ships timm in requirements.txt
    assert proc.returncode != 0 and proc.stdout == ""
    (err,) = proc.stderr.strip().splitlines()
    assert "requirements.txt" in err and "no NAT route" in err and "no public IPv4" in err, err
    assert "--index-url" in err and "--no-index --find-links" in err, err
    ec2 = sb.client("ec2")
    assert ec2.describe_launch_templates()["LaunchTemplates"] == []
    assert ec2.describe_security_groups(Filters=[{"Name": "tag-key", "Values": ["trainctl:job"]}])[
        "SecurityGroups"] == []
    # the same job without requirements.txt needs no internet
    proc = _launch(sb, tmp_path, _own_script(tmp_path, None), *P4D, "--dry-run")
    assert proc.returncode == 0, proc.stderr


def test_doctor_runs_the_same_pip_check_as_the_launch(sandbox_env, tmp_path):
    sb = sandbox_env
    add_endpoints(sb, ("ec2", "logs"), region="us-east-1")
    spec = Path(_own_script(tmp_path, "timm\n"))
    spec.write_text(spec.read_text().replace('layouts: ["g5.xlarge:1:spot"]', 'layouts: ["p4d.24xlarge:2:on-demand"]'))
    proc = run_cli(["--output", "json", "--region", "us-east-1", "doctor", str(spec), "--platform", "ec2"],
                   tmp_path / "home", env=sb.env, timeout=180)
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    route = checks["EC2 nodes reach AWS"]
    assert route["status"] == "fail" and "requirements.txt" in route["detail"] + route.get("fix", ""), route
    assert proc.returncode != 0


def test_requirements_that_install_offline_or_from_a_mirror_are_the_user_s_word(sandbox_env, tmp_path):
    sb = sandbox_env
    add_endpoints(sb, ("ec2", "logs"), region="us-east-1")
    for text, said in (("--no-index\n--find-links wheels\ntimm\n", "offline (--no-index)"),
                       ("-i https://my-domain-123456789012.d.codeartifact.us-east-1.amazonaws.com/pypi/py/simple/\n"
                        "timm\n", "from https://my-domain")):
        proc = _launch(sb, tmp_path, _own_script(tmp_path, text), *P4D, "--dry-run")
        assert proc.returncode == 0, proc.stderr
        assert any(n.startswith(f"requirements.txt installs {said}") for n in json.loads(proc.stdout)["notes"])


def test_single_card_nodes_with_a_public_ipv4_reach_pypi(sandbox_env, tmp_path):
    # the default VPC's subnets assign a public IPv4 and route to an internet gateway
    proc = _launch(sandbox_env, tmp_path, _own_script(tmp_path, "timm\n"), "--platform", "ec2", "--region",
                   "us-east-1", "--layout", "g5.xlarge:1:spot", "--dry-run")
    assert proc.returncode == 0, proc.stderr
