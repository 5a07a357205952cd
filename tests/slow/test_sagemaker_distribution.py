"""SageMaker's distributed libraries: `launch --distribution smddp|smp` and the spec's
`distribution:` send what the SageMaker Python SDK v2 sends for the equivalent PyTorch estimator.

The expected hyperparameters below are read from aws/sagemaker-python-sdk v2.257.6 (not installed: no SDK at
run time), for `sagemaker.pytorch.PyTorch(..., distribution=D).hyperparameters()`:
- src/sagemaker/pytorch/estimator.py `_pytorch_distribution_configuration`: torch_distributed enabled and
  "smdistributed" in D -> `EstimatorBase._distribution_configuration(D)`, then
  sagemaker_torch_distributed_enabled=True and sagemaker_instance_type;
- src/sagemaker/estimator.py `_distribution_configuration`: mp_parameters (modelparallel's "parameters", only
  when enabled and non-empty), sagemaker_distributed_dataparallel_enabled, sagemaker_instance_type, and with
  dataparallel enabled sagemaker_distributed_dataparallel_custom_mpi_options (default "");
- `EstimatorBase._json_encode_hyperparameters`: json.dumps of every value.
"""
from __future__ import annotations

import json

from tests.support.helpers import run_cli
from tests.support.job_args import ec2_args
from trainctl_sandbox.testing import add_nat

VIT = """\
name: dist-vit
entrypoint: {bundled: ddp, args: {model: vit_micro, device: cpu}}
model: {architecture: vit_micro, precision: bf16}
workload: {samples: 6400, batch_size_per_accelerator: 8}
candidates: {layouts: ['LAYOUT'], platforms: [sagemaker, ec2], regions: [us-east-1]}
"""

SCRIPT_SPEC = """\
name: dist-own
entrypoint: {script: train.py, source_dir: code}
model: {architecture: llama-7b, precision: bf16, optimizer: adamw, activation_checkpointing: true}
workload: {samples: 12800, batch_size_per_accelerator: 1}
candidates: {layouts: ['p4d.24xlarge:2:on-demand'], platforms: [sagemaker], regions: [us-east-1]}
distribution: smp
"""


def _launch(sandbox, tmp_path, text: str, *extra: str):
    add_nat(sandbox)  # multi-node SageMaker jobs run in the VPC and multi-card nodes have no public IP: a NAT
    (tmp_path / "code").mkdir(exist_ok=True)
    (tmp_path / "code" / "train.py").write_text("print('hello')\n")
    spec = tmp_path / "job.yaml"
    spec.write_text(text)
    return run_cli(["-o", "json", "launch", str(spec), "--dry-run", *extra], tmp_path / "home", env=sandbox.env)


def _create(doc: dict) -> dict:
    return next(r for r in doc["requests"] if r["operation"] == "CreateTrainingJob")["params"]


def _sdk_keys(hps: dict) -> dict:
    """The distribution's hyperparameters: the SDK's sagemaker_* ones (less the toolkit's own) and mp_parameters."""
    own = ("sagemaker_program", "sagemaker_submit_directory", "sagemaker_container_log_level", "sagemaker_job_name",
           "sagemaker_region")
    return {k: v for k, v in hps.items() if (k.startswith("sagemaker_") and k not in own) or k == "mp_parameters"}


def test_smddp_sends_the_sdk_s_contract_and_the_entrypoint_uses_its_backend(sandbox, tmp_path):
    proc = _launch(sandbox, tmp_path, VIT.replace("LAYOUT", "p4d.24xlarge:2:on-demand"), "--platform",
                   "sagemaker", "--distribution", "smddp")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    hps = _create(doc)["HyperParameters"]
    # distribution={"torch_distributed": {"enabled": True}, "smdistributed": {"dataparallel": {"enabled": True}}}
    assert _sdk_keys(hps) == {"sagemaker_distributed_dataparallel_enabled": "true",
                              "sagemaker_instance_type": '"ml.p4d.24xlarge"',
                              "sagemaker_distributed_dataparallel_custom_mpi_options": '""',
                              "sagemaker_torch_distributed_enabled": "true"}
    assert json.loads(hps["dist-backend"]) == "smddp"
    assert any(n.startswith("distribution smddp") and "assumes NCCL" in n for n in doc["notes"])


def test_smp_sends_mp_parameters_from_the_plan(sandbox, tmp_path):
    proc = _launch(sandbox, tmp_path, SCRIPT_SPEC)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    # 1 sequence per rank on 2 x 8 A100: hybrid sharding fits (state / 8) and communicates less on 2 nodes
    # (tests/unit/test_perf_memory.py): sharded over the node's 8 GPUs
    assert doc["option"]["strategy"] == "hsdp"
    degree = 8
    # distribution={"torch_distributed": {"enabled": True}, "smdistributed": {"modelparallel": {"enabled":
    # True, "parameters": {"hybrid_shard_degree": N, "tensor_parallel_degree": 1}}}}
    assert _sdk_keys(_create(doc)["HyperParameters"]) == {
        "mp_parameters": json.dumps({"hybrid_shard_degree": degree, "tensor_parallel_degree": 1}),
        "sagemaker_distributed_dataparallel_enabled": "false",
        "sagemaker_instance_type": '"ml.p4d.24xlarge"',
        "sagemaker_torch_distributed_enabled": "true"}


def test_smddp_is_refused_off_its_instance_types_in_one_line(sandbox, tmp_path):
    proc = _launch(sandbox, tmp_path, VIT.replace("LAYOUT", "g5.12xlarge:2:on-demand"), "--platform",
                   "sagemaker", "--distribution", "smddp")
    assert proc.returncode != 0
    line = proc.stderr.strip().splitlines()[-1]
    assert "smddp" in line and "ml.p4d.24xlarge" in line and "ml.g5.12xlarge" in line
    assert "Traceback" not in proc.stderr


def test_smp_is_refused_for_a_bundled_entrypoint_and_unknown_values(sandbox, tmp_path):
    layout = VIT.replace("LAYOUT", "p4d.24xlarge:1:on-demand")
    proc = _launch(sandbox, tmp_path, layout, "--platform", "sagemaker", "--distribution", "smp")
    assert proc.returncode != 0 and "torch.sagemaker.init()" in proc.stderr
    proc = _launch(sandbox, tmp_path, layout, "--platform", "sagemaker", "--distribution", "horovod")
    assert proc.returncode != 0 and "torch_distributed, smddp, smp" in proc.stderr


def test_ec2_runs_torchrun_whatever_the_spec_s_distribution(sandbox, tmp_path):
    text = VIT.replace("LAYOUT", "p4d.24xlarge:1:on-demand") + "distribution: smddp\n"
    proc = _launch(sandbox, tmp_path, text, "--platform", "ec2")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert any("SageMaker's: on EC2 the job runs torchrun with NCCL" in n for n in doc["notes"])
    args = ec2_args(doc)
    assert "dist-backend" not in args and args["model"] == "vit_micro"


def test_smp_gets_the_spec_s_tensor_parallel_degree_and_shards_what_is_left(sandbox, tmp_path):
    """model.tensor_parallel: 8 on 2 x 8 A100s: llama-7b's state per GPU is 1/8 (12.6 GiB with Adam), which a
    replicated data-parallel pair holds, so SMP v2 gets tensor_parallel_degree 8 and hybrid_shard_degree 1."""
    text = SCRIPT_SPEC.replace("activation_checkpointing: true}", "activation_checkpointing: true, tensor_parallel: 8}")
    proc = _launch(sandbox, tmp_path, text)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["option"]["strategy"] == "ddp"
    hps = _create(doc)["HyperParameters"]
    assert json.loads(hps["mp_parameters"]) == {"hybrid_shard_degree": 1, "tensor_parallel_degree": 8}
