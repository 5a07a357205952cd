"""SageMaker's distributed training settings (`launch --distribution`, the spec's `distribution:`), sent as the
SageMaker Python SDK v2 sends them for the equivalent PyTorch estimator (no SDK at run time).

Read in aws/sagemaker-python-sdk v2.257.6:
- `src/sagemaker/pytorch/estimator.py` `_pytorch_distribution_configuration` / `hyperparameters`: with
  `torch_distributed` enabled the job gets `sagemaker_torch_distributed_enabled` and `sagemaker_instance_type`;
  with `smdistributed` beside it, first everything of `EstimatorBase._distribution_configuration`.
- `src/sagemaker/estimator.py` `_distribution_configuration`: `mp_parameters` (SMP's `parameters`),
  `sagemaker_distributed_dataparallel_enabled`, `sagemaker_instance_type`, and for SDP
  `sagemaker_distributed_dataparallel_custom_mpi_options` (default ""); it refuses p5 unless torch_distributed
  is on ("SMModelParallel and SMDataParallel currently do not support p5 instances."). `sagemaker_mpi_*` go
  out only for `distribution["mpi"]`, which none of these uses.
- `EstimatorBase._json_encode_hyperparameters`: every value JSON-encoded (strings keep their quotes).

Each distribution here is torch_distributed plus, for smddp and smp, the `smdistributed` entry, so the
PyTorch container starts the script with torchrun (sagemaker-pytorch-training-toolkit `training.py` picks the
torch_distributed runner before the SMDataParallel one) and SDP works as a process-group backend.
"""
from __future__ import annotations

import json
from typing import Any

from trainctl.errors import UsageError

DISTRIBUTIONS = ("torch_distributed", "smddp", "smp")

# SMDDP's instance types. Two AWS sources differ: SDK v2.257.6's fw_utils.SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES
# (ml.p3.16xlarge, ml.p3dn.24xlarge, ml.p4d.24xlarge, ml.p4de.24xlarge; a list it no longer checks) and the
# SageMaker Developer Guide for SMDDP v2 (the library in PyTorch 2.x images, which dropped P3: aws/deep-learning-
# containers#3645): ml.p4d.24xlarge, ml.p4de.24xlarge, ml.p5.48xlarge. trainctl follows the Developer Guide:
# its images are PyTorch 2.x, and p5 is allowed by the SDK because torch_distributed is always on.
SMDDP_INSTANCE_TYPES = ("p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge")


def chosen(flag: str | None, spec: Any) -> str:
    """--distribution, else the spec's; one line for an unknown value."""
    kind = flag or getattr(spec, "distribution", None) or "torch_distributed"
    if kind not in DISTRIBUTIONS:
        raise UsageError(f"--distribution {kind!r}: choose one of {', '.join(DISTRIBUTIONS)}")
    return kind


def check(kind: str, spec: Any, option: Any, accelerator_kind: str) -> None:
    """Refuse, in one line, what SageMaker would refuse or what cannot run."""
    where = f"ml.{option.instance_type}"
    if kind == "smddp" and option.instance_type not in SMDDP_INSTANCE_TYPES:
        raise UsageError(f"--distribution smddp: SageMaker's data parallelism library runs on "
                         f"{', '.join('ml.' + t for t in SMDDP_INSTANCE_TYPES)} only, not {where}; use "
                         "--distribution torch_distributed, or a layout on one of those (--layout)")
    if kind == "smp" and accelerator_kind != "gpu":
        raise UsageError(f"--distribution smp: SageMaker's model parallelism library v2 runs on GPUs, not {where}")
    if kind == "smp" and spec.entrypoint.bundled:
        raise UsageError(f"--distribution smp: the bundled {spec.entrypoint.bundled} entrypoint does not call "
                         "torch.sagemaker.init() (SMP v2's entry); use smddp or torch_distributed, or your own "
                         "script (entrypoint.script)")


def smp_parameters(option: Any, ranks_per_node: int, tensor_parallel: int = 1) -> dict[str, int]:
    """SMP v2's parameters from the plan: hybrid_shard_degree is the ranks a model is sharded over (the node's
    for hybrid sharding, every rank for full, 1 for a replicated model), counted in tensor-parallel groups;
    tensor_parallel_degree is the spec's model.tensor_parallel ("must evenly divide the number of GPUs in your
    cluster", SMP v2 "Tensor parallelism"; the plan keeps it inside a node)."""
    degree = {"hsdp": ranks_per_node, "fsdp": option.accelerators}.get(option.strategy, 1)
    return {"hybrid_shard_degree": max(1, degree // tensor_parallel), "tensor_parallel_degree": tensor_parallel}


def estimator_distribution(kind: str, mp_parameters: dict | None = None) -> dict:
    """The `distribution` argument of the equivalent sagemaker.pytorch.PyTorch estimator (for people and docs)."""
    out: dict[str, Any] = {"torch_distributed": {"enabled": True}}
    if kind == "smddp":
        out["smdistributed"] = {"dataparallel": {"enabled": True}}
    elif kind == "smp":
        out["smdistributed"] = {"modelparallel": {"enabled": True, "parameters": mp_parameters or {}}}
    return out


def hyperparameters(kind: str, option: Any, multi_process: bool, mp_parameters: dict | None = None) -> dict[str, str]:
    """The SDK v2's hyperparameters for the distribution, JSON-encoded as it encodes them."""
    instance = f"ml.{option.instance_type}"
    values: dict[str, Any] = {}
    if kind == "smp":
        values["mp_parameters"] = mp_parameters or {}
    if kind in ("smddp", "smp"):
        values["sagemaker_distributed_dataparallel_enabled"] = kind == "smddp"
        values["sagemaker_instance_type"] = instance
    if kind == "smddp":
        values["sagemaker_distributed_dataparallel_custom_mpi_options"] = ""
    if kind != "torch_distributed" or multi_process:
        values["sagemaker_torch_distributed_enabled"] = True
    values["sagemaker_instance_type"] = instance
    return {k: json.dumps(v) for k, v in values.items()}


def describe(kind: str, mp_parameters: dict | None = None) -> str:
    words = {"torch_distributed": "torchrun with NCCL",
             "smddp": "torchrun with SageMaker's data parallelism library as the process-group backend "
                      "(the bundled entrypoints get --dist-backend smddp); the plan's throughput assumes NCCL's "
                      "communication: no published per-layout SMDDP figure to model it by",
             "smp": f"torchrun with SageMaker's model parallelism library v2, parameters "
                    f"{json.dumps(mp_parameters or {})}; the plan's throughput assumes NCCL's communication"}[kind]
    return f"distribution {kind}: {words} (SDK v2 `distribution` {json.dumps(estimator_distribution(kind, mp_parameters))})"
