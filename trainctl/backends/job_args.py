"""The one place a job's entrypoint arguments come from, for both platforms (SageMaker hyperparameters and the
EC2 agent's command line): what the plan assumed is what the job runs.

For the bundled entrypoints the plan's settings become arguments: the model of the spec's architecture, the per-rank batch (the spec's one batch
size), the optimizer steps the workload needs on this layout's ranks, the checkpoint interval, the precision,
and the accelerator's peak (for the MFU line). An argument the user set in `entrypoint.args` wins; the spec
loader already refused the ones that contradict the plan (a different batch size). A user's own script gets
its `entrypoint.args` only.

The LM entrypoint also gets the plan's layout, which the plan owns (a value in `entrypoint.args` does not
override it: the memory fit and the throughput were computed for this one): `--sharding` (none = DDP, full,
hybrid), `--batch-size` as the micro-batch that fits, `--grad-accum` and `--global-batch-size` (the spec's
per-rank batch of an optimizer step times the ranks; the entrypoint checks that it equals micro-batch x ranks
x accumulation, so a job started on a different number of ranks stops at once instead of training another
batch than planned).
"""
from __future__ import annotations

import math
from typing import Any

# The plan's strategy as train_lm.py's --sharding.
LM_SHARDING = {"ddp": "none", "fsdp": "full", "hsdp": "hybrid"}


def _given(args: dict[str, Any], name: str) -> bool:
    return any(k.replace("_", "-") == name for k in args)


def entrypoint_args(spec: Any, option: Any, inst: Any, distribution: str = "torch_distributed") -> dict[str, Any]:
    """The arguments, in order: the user's, then what the plan (and the launch's SageMaker distribution, see
    backends/sagemaker/distribution.py) adds for a bundled entrypoint."""
    # Exactly the user's arguments, whatever their names: no platform passes or owns one (docs/your-script.md).
    args = dict(spec.entrypoint.args)
    if not spec.entrypoint.bundled:
        return args
    batch = spec.workload.batch_size_per_accelerator
    ranks = max(1, option.accelerators)
    plan_args: dict[str, Any] = {
        "batch-size": batch,
        "steps": max(1, math.ceil(spec.workload.total_samples / (batch * ranks))),
        "checkpoint-seconds": int(spec.constraints.checkpoint_interval_minutes * 60),
        # the step's batch over every rank of the layout: an elastic job on fewer nodes keeps it (more accumulation)
        "global-batch-size": batch * ranks,
        # The bundled entrypoints train in bf16 or fp32: an fp32 plan must not train bf16 (and vice versa).
        "bf16": spec.model.precision == "bf16",
    }
    peak = inst.accelerator.peak_tflops.get(spec.model.precision)
    if peak:  # per rank: a Trainium chip runs one rank per NeuronCore
        plan_args["peak-tflops"] = round(peak * inst.accelerator_count / max(1, option.accelerators // option.count), 3)
    # The architecture the plan priced is the model the job builds (entrypoints/architectures.txt).
    from trainctl.entrypoints.trainctl_architectures import buildable

    arch_args = buildable().get(spec.entrypoint.bundled, {}).get(spec.model.architecture or "", {})
    plan_args = {**arch_args, **plan_args}
    for name, value in plan_args.items():
        if not _given(args, name):
            args[name] = value
    if spec.entrypoint.bundled == "lm":
        args = _lm_layout(args, option, batch, ranks)
    if distribution == "smddp" and not _given(args, "dist-backend"):
        # SageMaker's data parallelism is a process-group backend: the bundled entrypoints initialise with it.
        args["dist-backend"] = "smddp"
    return args


def _lm_layout(args: dict[str, Any], option: Any, batch: int, ranks: int) -> dict[str, Any]:
    owned = ("sharding", "batch-size", "grad-accum", "global-batch-size")
    out = {k: v for k, v in args.items() if k.replace("_", "-") not in owned}
    micro = option.micro_batch or batch
    out.update({"sharding": LM_SHARDING[option.strategy], "batch-size": micro,
                "grad-accum": max(1, batch // micro), "global-batch-size": batch * ranks})
    return out


def as_command_line(args: dict[str, Any]) -> list[str]:
    """The script's arguments on an EC2 node, by the rule SageMaker's training toolkit applies to a job's
    hyperparameters (sagemaker-training-toolkit `mapping.to_cmd_args`, after decoding the JSON the SDK and
    sagemaker/prepare.py encode): keys sorted, `--key value` (`-k value` for a one-letter key), every value as
    Python's str(), so a boolean arrives as `True` or `False`. The same arguments, in the same form, on both."""
    out: list[str] = []
    for key in sorted(args):
        out += [f"--{key}" if len(str(key)) > 1 else f"-{key}", str(args[key])]
    return out


def total_steps(spec: Any, option: Any) -> int:
    """The optimizer steps the spec's workload takes on this layout (its samples over the batch of every rank):
    the budget's projection of any script's remaining steps when the script prints no total_steps=."""
    batch = spec.workload.batch_size_per_accelerator
    return max(1, math.ceil(spec.workload.total_samples / (batch * max(1, option.accelerators))))


def job_settings(spec: Any, option: Any, inst: Any, distribution: str = "torch_distributed") -> dict[str, Any]:
    """What the plan assumed and the job gets, for `launch --dry-run` (its "job_settings" key): the settings
    the plan depends on and the exact arguments the entrypoint receives (the ones both platforms pass)."""
    args = entrypoint_args(spec, option, inst, distribution)
    return {"entrypoint": f"bundled {spec.entrypoint.bundled}" if spec.entrypoint.bundled else spec.entrypoint.script,
            "precision": spec.model.precision, "batch_size_per_accelerator": spec.workload.batch_size_per_accelerator,
            "strategy": option.strategy, "micro_batch": option.micro_batch or spec.workload.batch_size_per_accelerator,
            "grad_accum": option.grad_accum, "checkpoint_interval_minutes": spec.constraints.checkpoint_interval_minutes,
            "steps": args.get("steps"), "args": args}


def layout_note(spec: Any, option: Any) -> str:
    """One line for the launch preview: how the job's ranks hold the model and split the batch."""
    how = {"ddp": "replicated (DDP)", "fsdp": "fully sharded (FSDP)",
           "hsdp": "sharded within each node, replicated across nodes (hybrid FSDP)"}[option.strategy]
    batch = spec.workload.batch_size_per_accelerator
    micro = option.micro_batch or batch
    line = (f"layout: model {how} over {option.accelerators} rank{'s' if option.accelerators != 1 else ''}; {batch} "
            "samples per rank per step"
            + (f" as micro-batch {micro} x {option.grad_accum} accumulated" if option.grad_accum > 1 else ""))
    if spec.entrypoint.bundled == "lm":
        line += f" (train_lm.py --sharding {LM_SHARDING[option.strategy]})"
    return line
