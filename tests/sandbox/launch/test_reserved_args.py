"""A spec's arguments reach the script, never the platform: `sagemaker_*` keys (which SageMaker's training
toolkit reads as its own settings) are refused in one line; the dry run shows the arguments as they are sent;
on EC2 an argument value that looks like a user-data placeholder reaches the node as it was written."""
from __future__ import annotations

import base64
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.support.helpers import run_cli

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "own-script"


def _project(root: Path, args: str, platform: str = "sagemaker") -> Path:
    shutil.copytree(EXAMPLE, root)
    spec = (root / "job.yaml").read_text().replace("args: {batch-size: 32, log-every: 20}", f"args: {args}")
    (root / "job.yaml").write_text(spec.replace("platforms: [sagemaker]", f"platforms: [{platform}]"))
    return root / "job.yaml"


@pytest.mark.parametrize("key", ["sagemaker_mpi_enabled", "sagemaker_program", "SageMaker-MPI-Custom-MPI-Options"])
def test_a_reserved_argument_key_is_refused_in_one_line(tmp_path, key):
    spec = _project(tmp_path / "p", f"{{{key}: 'true', batch-size: 32}}")
    proc = run_cli(["plan", str(spec), "--offline"], tmp_path / "home")
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert f"argument '{key}' is reserved" in line and "job.yaml" in line


def test_an_argument_value_that_looks_like_a_placeholder_reaches_the_ec2_node_as_written(sandbox_env, tmp_path):
    spec = _project(tmp_path / "p", "{tag: __NODE_PACKAGE__, blob: __AGENT__, who: __JOB_ID__}", platform="ec2")
    proc = run_cli(["--output", "json", "launch", str(spec), "--dry-run", "--layout", "g5.xlarge:1:spot"],
                   Path(os.environ["TRAINCTL_HOME"]), env=sandbox_env.env)
    assert proc.returncode == 0, proc.stderr
    (template,) = [c for c in json.loads(proc.stdout)["requests"] if c["operation"] == "CreateLaunchTemplate"]
    user_data = base64.b64decode(template["params"]["LaunchTemplateData"]["UserData"]).decode()
    config = json.loads(user_data.split("<<'TRAINCTL_CONFIG'\n", 1)[1].split("\nTRAINCTL_CONFIG\n", 1)[0])
    args = dict(zip(config["args"][::2], config["args"][1::2]))
    assert (args["--tag"], args["--blob"], args["--who"]) == ("__NODE_PACKAGE__", "__AGENT__", "__JOB_ID__")


@pytest.mark.parametrize("flags", [["--layout", "g5.xlarge:1:on-demand"],
                                   ["--layout", "p4d.24xlarge:1:on-demand", "--distribution", "smddp"]])
def test_the_dry_runs_job_settings_are_the_arguments_sent(sandbox_env, flags):
    spec = str(Path(__file__).parents[2] / "support" / "launch_specs" / "tiny-vit-sagemaker.yaml")
    proc = run_cli(["--output", "json", "launch", spec, "--dry-run", *flags], Path(os.environ["TRAINCTL_HOME"]),
                   env=sandbox_env.env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    (create,) = [c for c in doc["requests"] if c["operation"] == "CreateTrainingJob"]
    sent = {k: json.loads(v) for k, v in create["params"]["HyperParameters"].items() if not k.startswith("sagemaker_")}
    assert doc["job_settings"]["args"] == sent


def test_every_argument_of_the_spec_reaches_the_script_on_both_platforms_checkpoint_dir_included(sandbox_env,
                                                                                                 tmp_path):
    """No platform owns an argument any more (issue 37): a `checkpoint-dir` of the user's is passed like any other,
    in the training toolkit's form, on SageMaker and on EC2."""
    sent = {}
    for platform in ("sagemaker", "ec2"):
        spec = _project(tmp_path / platform, "{checkpoint-dir: /opt/ml/checkpoints/run-1, log-every: 20}", platform)
        proc = run_cli(["--output", "json", "launch", str(spec), "--dry-run", "--layout", "g5.xlarge:1:spot"],
                       Path(os.environ["TRAINCTL_HOME"]), env=sandbox_env.env)
        assert proc.returncode == 0, proc.stderr
        calls = {c["operation"]: c["params"] for c in json.loads(proc.stdout)["requests"]}
        if platform == "sagemaker":
            hps = calls["CreateTrainingJob"]["HyperParameters"]
            sent[platform] = {k: json.loads(v) for k, v in hps.items() if not k.startswith("sagemaker_")}
        else:
            user_data = base64.b64decode(calls["CreateLaunchTemplate"]["LaunchTemplateData"]["UserData"]).decode()
            config = json.loads(user_data.split("<<'TRAINCTL_CONFIG'\n", 1)[1].split("\nTRAINCTL_CONFIG\n", 1)[0])
            sent[platform] = config["args"]
    assert sent["sagemaker"] == {"checkpoint-dir": "/opt/ml/checkpoints/run-1", "log-every": 20}
    assert sent["ec2"] == ["--checkpoint-dir", "/opt/ml/checkpoints/run-1", "--log-every", "20"]
