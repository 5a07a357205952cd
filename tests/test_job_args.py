"""What the plan assumed is what the job runs, on both platforms (issues 12, 13, 14): the one batch size, the
steps the workload needs on the layout's ranks, the checkpoint interval, the precision and the accelerator's
peak reach the bundled entrypoint, and SageMaker's hyperparameters and EC2's agent command line agree."""
from __future__ import annotations

import base64
import json

from helpers import run_cli

SPEC = """\
name: args-fp32
entrypoint: {bundled: ddp, args: {model: vit_micro, device: cpu}}
model: {architecture: vit_micro, precision: fp32}
workload: {samples: 640, batch_size_per_accelerator: 8}
candidates: {layouts: ['g5.12xlarge:2:on-demand'], platforms: [sagemaker, ec2], regions: [us-east-1]}
constraints: {checkpoint_interval_minutes: 15}
"""


def _dry_run(sandbox, tmp_path, platform: str) -> dict:
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC)
    proc = run_cli(["-o", "json", "launch", str(spec), "--platform", platform, "--dry-run"], tmp_path / "home",
                   env=sandbox.env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _sagemaker_args(doc: dict) -> dict[str, str]:
    job = next(r for r in doc["requests"] if r["operation"] == "CreateTrainingJob")["params"]
    return {k: json.loads(v) if v.startswith('"') else v for k, v in job["HyperParameters"].items()
            if not k.startswith("sagemaker_")}


def _ec2_args(doc: dict) -> dict[str, str]:
    lt = next(r for r in doc["requests"] if r["operation"] == "CreateLaunchTemplate")["params"]
    user_data = base64.b64decode(lt["LaunchTemplateData"]["UserData"]).decode()
    config = json.loads(user_data.split("<<'TRAINCTL_CONFIG'\n", 1)[1].split("\nTRAINCTL_CONFIG", 1)[0])
    flat = config["args"]
    return {flat[i][2:]: flat[i + 1] for i in range(0, len(flat), 2)}


def test_the_plan_s_settings_reach_the_job_alike_on_both_platforms(sandbox, tmp_path):
    sm = _sagemaker_args(_dry_run(sandbox, tmp_path, "sagemaker"))
    ec2 = _ec2_args(_dry_run(sandbox, tmp_path, "ec2"))
    # 640 samples / (8 per rank x 2 nodes x 4 A10G) = 10 optimizer steps; fp32 plans train fp32.
    expected = {"model": "vit_micro", "device": "cpu", "batch-size": "8", "steps": "10",
                "checkpoint-seconds": "900", "bf16": "false", "peak-tflops": "31.2"}
    assert {k: str(v).lower() for k, v in sm.items()} == expected
    assert ec2 == expected


def test_ec2_jobs_get_a_maximum_runtime_like_sagemaker(sandbox, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC)
    docs = {}
    for platform in ("sagemaker", "ec2"):
        proc = run_cli(["-o", "json", "launch", str(spec), "--platform", platform, "--dry-run",
                        "--max-runtime-hours", "2"], tmp_path / "home", env=sandbox.env)
        assert proc.returncode == 0, proc.stderr
        docs[platform] = json.loads(proc.stdout)
    job = next(r for r in docs["sagemaker"]["requests"] if r["operation"] == "CreateTrainingJob")["params"]
    lt = next(r for r in docs["ec2"]["requests"] if r["operation"] == "CreateLaunchTemplate")["params"]
    user_data = base64.b64decode(lt["LaunchTemplateData"]["UserData"]).decode()
    config = json.loads(user_data.split("<<'TRAINCTL_CONFIG'\n", 1)[1].split("\nTRAINCTL_CONFIG", 1)[0])
    assert config["max_runtime_s"] == job["StoppingCondition"]["MaxRuntimeInSeconds"] == 7200
    assert config["not_after"] > 7200  # a wall-clock end the node agents enforce
