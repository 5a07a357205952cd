"""`--distribution smp` runs on SageMaker's smdistributed-modelparallel image, the only one with SMP v2
(`torch.sagemaker`): its own account and tag (SDK image_uri_config/pytorch-smp.json), refused in one line in
a region where it is not published; the sandbox fails an SMP job on any other image as SageMaker would."""
from __future__ import annotations

import json

import pytest

from tests.support.helpers import run_cli
from trainctl.backends.sagemaker.images import smp_image
from trainctl.errors import UsageError
from trainctl_sandbox.sagemaker.validation import smp_image_failure
from trainctl_sandbox.testing import add_nat

SMP = "658645717510.dkr.ecr.us-east-1.amazonaws.com/smdistributed-modelparallel:2.5.1-gpu-py311-cu124"
SCRIPT_SPEC = """\
name: smp-own
entrypoint: {script: train.py, source_dir: code}
model: {architecture: llama-7b, precision: bf16, optimizer: adamw, activation_checkpointing: true}
workload: {samples: 12800, batch_size_per_accelerator: 1}
candidates: {layouts: ['p4d.24xlarge:2:on-demand'], platforms: [sagemaker], regions: [us-east-1]}
distribution: smp
"""


def _dry_run(sandbox, tmp_path) -> dict:
    add_nat(sandbox)  # a SageMaker job of several nodes runs in the VPC
    (tmp_path / "code").mkdir(exist_ok=True)
    (tmp_path / "code" / "train.py").write_text("import torch.sagemaker\n")
    (tmp_path / "job.yaml").write_text(SCRIPT_SPEC)
    proc = run_cli(["-o", "json", "launch", str(tmp_path / "job.yaml"), "--dry-run"], tmp_path / "home",
                   env=sandbox.env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_smp_launches_on_the_smdistributed_modelparallel_image(sandbox, tmp_path):
    doc = _dry_run(sandbox, tmp_path)
    job = next(r for r in doc["requests"] if r["operation"] == "CreateTrainingJob")["params"]
    assert job["AlgorithmSpecification"]["TrainingImage"] == SMP
    # the job's own role may pull exactly that repository
    policy = json.loads(next(r for r in doc["requests"] if r["operation"] == "PutRolePolicy")["params"]["PolicyDocument"])
    pull = next(st for st in policy["Statement"] if st["Sid"] == "PullImage")
    assert pull["Resource"] == "arn:aws:ecr:us-east-1:658645717510:repository/smdistributed-modelparallel"


def test_smp_is_refused_where_its_image_is_not_published():
    with pytest.raises(UsageError, match="ap-southeast-5"):
        smp_image("ap-southeast-5")


def test_the_sandbox_fails_an_smp_job_on_the_plain_pytorch_image():
    plain = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-gpu-py311-cu124-ubuntu22.04-sagemaker"
    assert "No module named 'torch.sagemaker'" in smp_image_failure({"mp_parameters": {}}, plain)
    assert smp_image_failure({"mp_parameters": {}}, SMP) is None
    assert smp_image_failure({}, plain) is None
