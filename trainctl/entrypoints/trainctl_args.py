"""Arguments of the bundled training scripts, and what the platform's environment says.

Every script takes the same core flags (steps, batch size, seed, device, checkpoints, logging),
SageMaker-style ``--key value`` strings included; each script adds its own on top. Plain module
beside the scripts (``import trainctl_args``): no package, no torch.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from typing import Any, Sequence

# Where SageMaker's CheckpointConfig.LocalPath points by default; SageMaker syncs it to S3 and
# restores it before the script starts again after a Spot interruption. trainctl's EC2 node agent syncs
# and restores the same folder, so the scripts need no checkpoint argument on either platform.
SAGEMAKER_CHECKPOINT_DIR = "/opt/ml/checkpoints"


def str2bool(value: str | bool) -> bool:
    """SageMaker passes every hyperparameter as a string ("true", "True", "1")."""
    if isinstance(value, bool):
        return value
    lowered = str(value).strip().lower()
    if lowered in ("1", "true", "yes", "y", "on"):
        return True
    if lowered in ("0", "false", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def optional_path(value: str) -> str | None:
    """'' / 'none' / 'off' switch a path option off (a hyperparameter cannot be unset otherwise)."""
    if value is None or str(value).strip().lower() in ("", "none", "null", "off", "false"):
        return None
    return str(value)


def positive_int(value: str) -> int:
    number = int(str(value).strip())
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def non_negative_int(value: str) -> int:
    number = int(str(value).strip())
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {number}")
    return number


def non_negative_float(value: str) -> float:
    number = float(str(value).strip())
    if not number >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {number}")
    return number


def on_sagemaker(env: dict[str, str] | None = None) -> bool:
    """In a training container of SageMaker's contract: SageMaker's, or an EC2 node of trainctl, whose agent
    sets the same variables and paths (docs/your-script.md)."""
    env = os.environ if env is None else env
    # The training toolkit sets these in every SageMaker training container.
    return bool(env.get("SM_TRAINING_ENV") or env.get("SM_MODEL_DIR") or env.get("SM_CURRENT_HOST"))


def add_option(parser: argparse.ArgumentParser, flag: str, **kwargs: Any) -> None:
    """Add --some-flag, also spelled --some_flag: SageMaker hyperparameter keys are often written
    with underscores (batch_size), and a launcher or a user should not trip over that."""
    names = [flag]
    if "-" in flag[2:]:
        names.append("--" + flag[2:].replace("-", "_"))
    parser.add_argument(*names, **kwargs)


def build_parser(description: str, devices: Sequence[str],
                 data_help: str = "training data; default SM_CHANNEL_TRAIN, else synthetic data",
                 ) -> argparse.ArgumentParser:
    """The flags every bundled script takes; a script adds its own (model, data options)."""
    parser = argparse.ArgumentParser(description=description, allow_abbrev=False)

    def add(flag: str, **kwargs: Any) -> None:
        add_option(parser, flag, **kwargs)

    add("--batch-size", type=positive_int, default=128, help="samples per accelerator per step")
    add("--steps", type=positive_int, default=1000, help="optimizer steps in total")
    add("--lr", type=non_negative_float, default=3e-4, help="Adam peak learning rate")
    add("--warmup-steps", type=non_negative_int, default=None,
        help="linear warm-up steps before the cosine decay (default: steps/10, at most 1000)")
    add("--seed", type=non_negative_int, default=0)
    add("--device", choices=list(devices), default=None,
        help="default: what is there")
    add("--bf16", type=str2bool, default=True,
        help="bf16 autocast (true|false); on a CPU without native bf16 it is emulated and far "
             "slower than false")
    add("--checkpoint-dir", type=optional_path, default=None,
        help=f"default {SAGEMAKER_CHECKPOINT_DIR} where SageMaker's SM_* variables are set (SageMaker, trainctl's "
             "EC2 nodes), else no checkpoints")
    add("--checkpoint-every", type=non_negative_int, default=0, help="steps; 0 = off")
    add("--checkpoint-seconds", type=non_negative_float, default=600.0,
        help="also checkpoint when this long has passed since the last one; 0 = off")
    add("--keep", type=positive_int, default=3, help="keep the last K checkpoints")
    add("--log-every", type=positive_int, default=10, help="steps between metric lines")
    add("--data-dir", type=optional_path, default=None, help=data_help)
    add("--model-dir", type=optional_path, default=None,
        help="where rank 0 writes the final model (default SM_MODEL_DIR, else none)")
    if "cuda" in devices:  # torch.distributed's process group (the Neuron script uses XLA's)
        add("--dist-backend", choices=("auto", "smddp"), default="auto",
            help="auto: NCCL on GPUs, gloo on CPUs; smddp: SageMaker's data parallelism library "
                 "(its images only; otherwise a warning and the usual backend)")
    add("--peak-tflops", type=non_negative_float, default=0.0,
        help="the accelerator's dense peak in TFLOP/s at the training precision, passed in by "
             "the launcher; with it, scripts that know their model's FLOPs print mfu= lines")
    return parser


def finish_args(args: argparse.Namespace, env: dict[str, str] | None = None) -> argparse.Namespace:
    """Fill the defaults that depend on the platform: SageMaker's folders, or nothing."""
    env = os.environ if env is None else env
    explicit = set(getattr(args, "_explicit", ()))
    if args.checkpoint_dir is None and "checkpoint_dir" not in explicit and on_sagemaker(env):
        # /opt/ml, or where the toolkit's SAGEMAKER_BASE_DIR puts it (an EC2 node agent's folder beside its own)
        base = env.get("SAGEMAKER_BASE_DIR")
        args.checkpoint_dir = os.path.join(base, "checkpoints") if base else SAGEMAKER_CHECKPOINT_DIR
    if args.model_dir is None and "model_dir" not in explicit:
        args.model_dir = env.get("SM_MODEL_DIR") or None
    from trainctl_data import train_channel, train_channel_sharded

    if args.data_dir is None and "data_dir" not in explicit:
        args.data_dir = train_channel(env)   # the `train` channel, on SageMaker and on EC2 alike
    args.data_sharded = train_channel_sharded(env, args.data_dir)   # each host holds only its share of its files
    if args.warmup_steps is None:
        args.warmup_steps = min(1000, args.steps // 10)
    return args


def _unquote(token: str) -> str:
    """SageMaker's HyperParameters are JSON-encoded strings; a launcher that encodes twice (or a
    hand-written job) hands the script '"vit_micro"' with the quotes. Take them off."""
    if len(token) >= 2 and token[0] == token[-1] == '"':
        return token[1:-1]
    return token


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None,
               env: dict[str, str] | None = None) -> argparse.Namespace:
    from trainctl_secrets import load_secrets

    argv = [_unquote(token) for token in (sys.argv[1:] if argv is None else argv)]
    args = parser.parse_args(argv)
    load_secrets(env)  # SageMaker: the spec's secrets, by ARN, into the environment (EC2: the agent did it)
    # Remember which path options were given at all, so that an explicit "--checkpoint-dir none"
    # on SageMaker really switches checkpoints off instead of falling back to the default.
    explicit = set()
    for token in argv:
        if token.startswith("--"):
            explicit.add(token[2:].split("=", 1)[0].replace("-", "_"))
    args._explicit = sorted(explicit)
    return finish_args(args, env)


def platform_summary(env: dict[str, str] | None = None) -> dict[str, str]:
    """What the platform says about this host, for the start-up line (SageMaker only)."""
    env = os.environ if env is None else env
    if not on_sagemaker(env):
        return {"platform": "local-or-ec2", "host": socket.gethostname()}
    return {
        "platform": "sagemaker",
        "host": env.get("SM_CURRENT_HOST", socket.gethostname()),
        "hosts": env.get("SM_HOSTS", "[]").replace(" ", ""),
        "gpus": env.get("SM_NUM_GPUS", "0"),
        "neurons": env.get("SM_NUM_NEURONS", "0"),
    }

