"""What the plan assumed is what the job runs, on both platforms (issues 12, 13, 14): the one batch size, the
steps the workload needs on the layout's ranks, the checkpoint interval, the precision and the accelerator's
peak reach the bundled entrypoint, and SageMaker's hyperparameters and EC2's agent command line agree: the EC2
command line is exactly what SageMaker's training toolkit makes of the hyperparameters (mapping.to_cmd_args on
the decoded values: keys sorted, a boolean as `True`/`False`), issue 37."""
from __future__ import annotations

import base64
import json

from tests.support.helpers import run_cli
from tests.support.job_args import (ec2_args, ec2_command_line, ec2_config, sagemaker_args,
                                     toolkit_command_line)
from trainctl_sandbox.testing import add_nat

SPEC = """\
name: args-fp32
entrypoint: {bundled: ddp, args: {model: vit_micro, device: cpu}}
model: {architecture: vit_micro, precision: fp32}
workload: {samples: 640, batch_size_per_accelerator: 8}
candidates: {layouts: ['g5.12xlarge:2:on-demand'], platforms: [sagemaker, ec2], regions: [us-east-1]}
constraints: {checkpoint_interval_minutes: 15}
"""


def _dry_run(sandbox, tmp_path, platform: str, text: str = SPEC) -> dict:
    add_nat(sandbox)  # multi-node SageMaker jobs run in the VPC and multi-card nodes have no public IP: a NAT
    spec = tmp_path / "job.yaml"
    spec.write_text(text)
    proc = run_cli(["-o", "json", "launch", str(spec), "--platform", platform, "--dry-run"], tmp_path / "home",
                   env=sandbox.env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_plan_s_settings_reach_the_job_alike_on_both_platforms(sandbox, tmp_path):
    sm_doc, ec2_doc = _dry_run(sandbox, tmp_path, "sagemaker"), _dry_run(sandbox, tmp_path, "ec2")
    sm, ec2 = sagemaker_args(sm_doc), ec2_args(ec2_doc)
    # 640 samples / (8 per rank x 2 nodes x 4 A10G) = 10 optimizer steps; fp32 plans train fp32.
    expected = {"model": "vit_micro", "device": "cpu", "batch-size": "8", "steps": "10",
                "checkpoint-seconds": "900", "bf16": "False", "peak-tflops": "31.2",
                "global-batch-size": "64"}   # 8 x 8 ranks: kept by an elastic job on fewer nodes
    assert {k: str(v) for k, v in sm.items()} == expected
    assert ec2 == expected
    # the same command line, in the same order, on both platforms (no --checkpoint-dir appended on EC2)
    assert ec2_command_line(ec2_doc) == toolkit_command_line(sm_doc)
    # the node agent's own knowledge: the plan's steps (the budget projects any script's remainder from them) and
    # no rerun of a failed script unless the spec asks (entrypoint.max_retries)
    config = ec2_config(ec2_doc)
    assert (config["total_steps"], config["max_retries"], config["instance_type"]) == (10, 0, "g5.12xlarge")


def test_ec2_jobs_get_a_maximum_runtime_like_sagemaker(sandbox, tmp_path):
    add_nat(sandbox)  # multi-node SageMaker jobs run in the VPC and multi-card nodes have no public IP: a NAT
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


ARCH_SPEC = """\
name: arch-check
entrypoint: {{bundled: {bundled}}}
model: {{architecture: {arch}}}
workload: {{samples: 640, batch_size_per_accelerator: 8}}
candidates: {{layouts: ['g5.12xlarge:2:on-demand'], platforms: [sagemaker], regions: [us-east-1]}}
"""


def test_a_spec_the_bundled_entrypoint_cannot_build_fails_at_plan_and_launch_in_one_line(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(ARCH_SPEC.format(bundled="ddp", arch="bert-large"))
    for args in (["plan", str(spec), "--offline"], ["launch", str(spec), "--offline", "--dry-run"]):
        proc = run_cli(args, tmp_path / "home")
        assert proc.returncode == 2 and proc.stdout == "", proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        # the architectures named are the entrypoint's own list (entrypoints/architectures.txt)
        assert f"{spec}:3: field 'model.architecture': the bundled ddp entrypoint cannot build 'bert-large'; it " \
               "trains vit_base_patch16_224, vit_large_patch16_224, vit_micro" in line
    spec.write_text(ARCH_SPEC.format(bundled="ddp", arch="llama-7b"))
    proc = run_cli(["plan", str(spec), "--offline"], tmp_path / "home")
    assert proc.returncode == 2 and "use entrypoint: {bundled: lm}" in proc.stderr


def test_the_architecture_the_plan_priced_is_the_model_the_job_builds(sandbox, tmp_path):
    add_nat(sandbox)  # multi-node SageMaker jobs run in the VPC and multi-card nodes have no public IP: a NAT
    spec = tmp_path / "job.yaml"
    spec.write_text(ARCH_SPEC.format(bundled="ddp", arch="vit_large_patch16_224"))
    proc = run_cli(["-o", "json", "launch", str(spec), "--dry-run"], tmp_path / "home", env=sandbox.env)
    assert proc.returncode == 0, proc.stderr
    assert sagemaker_args(json.loads(proc.stdout))["model"] == "vit_large_patch16_224"
    # an argument that builds another model than the priced architecture is refused, with its line
    spec.write_text(ARCH_SPEC.format(bundled="ddp, args: {model: vit_micro}", arch="vit_large_patch16_224"))
    proc = run_cli(["plan", str(spec), "--offline"], tmp_path / "home")
    assert proc.returncode == 2 and f"{spec}:2: field 'entrypoint.args.model': 'vit_micro' builds another " \
                                    "model" in proc.stderr


def test_the_entrypoint_reads_the_same_list(tmp_path):
    """train_ddp.py's --model choices are architectures.txt's: a model outside it is argparse's one line."""
    import subprocess
    import sys
    from pathlib import Path

    import trainctl.entrypoints as ep

    proc = subprocess.run([sys.executable, str(Path(ep.ENTRYPOINTS_DIR) / "train_ddp.py"), "--model", "bert-large",
                           "--device", "cpu"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2
    assert "invalid choice: 'bert-large'" in proc.stderr
    assert all(name in proc.stderr for name in ("vit_base_patch16_224", "vit_large_patch16_224", "vit_micro"))


LM_SPEC = """\
name: args-lm
entrypoint: {bundled: lm, args: {preset: 7b}}
model: {architecture: llama-7b, precision: bf16, optimizer: adamw, activation_checkpointing: true}
workload: {samples: 1280, batch_size_per_accelerator: 16}
candidates: {layouts: ['p4d.24xlarge:1:on-demand'], platforms: [sagemaker, ec2], regions: [us-east-1]}
"""


def test_the_plan_s_sharding_and_micro_batch_reach_the_lm_entrypoint_on_both_platforms(sandbox, tmp_path):
    """16 sequences per rank do not fit an A100 40 GB at once (36.1 GiB > 36, tests/
    unit/test_perf_memory.py): the plan fully shards over the 8 GPUs at micro-batch 8 x 2, and the launch passes
    exactly that, on SageMaker and on EC2, and says so in its notes."""
    docs = {p: _dry_run(sandbox, tmp_path, p, LM_SPEC) for p in ("sagemaker", "ec2")}
    sm, ec2 = sagemaker_args(docs["sagemaker"]), ec2_args(docs["ec2"])
    # 1280 samples / (16 per rank x 8 ranks) = 10 steps; A100 bf16 dense peak 312 TFLOPS per rank
    expected = {"preset": "7b", "batch-size": "8", "grad-accum": "2", "global-batch-size": "128",
                "sharding": "full", "steps": "10", "checkpoint-seconds": "1800", "bf16": "True",
                "peak-tflops": "312.0"}
    assert {k: str(v) for k, v in sm.items()} == expected
    assert ec2 == expected
    for doc in docs.values():
        assert (doc["option"]["strategy"], doc["option"]["micro_batch"], doc["option"]["grad_accum"]) == \
            ("fsdp", 8, 2)
        assert any("micro-batch 8 x 2 accumulated" in n and "--sharding full" in n for n in doc["notes"])
