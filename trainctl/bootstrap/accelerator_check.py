"""The node agent's first check: the accelerators the plan paid for are there, before anything else runs.

SageMaker checks its instances' GPUs before a job's script starts (SageMaker Developer Guide, "Training job
health checks and automatic restarts": deep health checks of the GPUs and NVLink); an EC2 node has only the
agent. A node whose image cannot drive its GPUs (a driver without the card's architecture, a CUDA that dropped
it) sees none: `nvidia-smi -L` fails with "couldn't communicate with the NVIDIA driver" or lists fewer, and a
script that picks `"cuda" if torch.cuda.is_available() else "cpu"` trains on the CPU until its budget ends it.
So the agent counts the devices and fails the node in seconds, with the reason, instead.

The same count is what the training is told it has, as SageMaker's training toolkit tells it
(sagemaker-training-toolkit `environment.num_gpus`: the `GPU ` lines of `nvidia-smi --list-gpus`, 0 where the
tool fails; `num_neurons`: NeuronCores): SM_NUM_GPUS / SM_NUM_NEURONS (sm_env.py), from which the bundled
scripts take their device (entrypoints/trainctl_torchdev.py `pick_device`). One rule narrows it:
CUDA_VISIBLE_DEVICES, where the node's environment sets it, is what CUDA shows the training (NVIDIA, CUDA C++
Programming Guide, "CUDA Environment Variables"), so the training is told the GPUs it leaves; the check still
counts the driver's (the hardware paid for) and says when the environment hides them.

- GPUs: `nvidia-smi -L` (the NVIDIA driver's tool, on every GPU DLAMI), one `GPU <i>:` line per GPU;
- Trainium/Inferentia: the Neuron driver's device files, `/dev/neuron<i>`, one per chip (Neuron documentation,
  "Neuron driver": aws-neuronx-dkms creates them); TRAINCTL_DEVICE_ROOT moves `/dev`, as TRAINCTL_IMDS_ENDPOINT
  moves IMDS, for a host that stands in for a node.
Standard library only (it runs with the agent, on the DLAMI's Python).
"""
from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping

NVIDIA_SMI_TIMEOUT_S = 60   # nvidia-smi answers in about a second; a hung driver must not hold the node


def expected(cfg: dict) -> tuple[str, int]:
    """(accelerator kind, devices the instance type has: GPUs, or Neuron chips), as the launch wrote them into the
    node config (backends/ec2/prepare.py); a config without `accelerator_count` asks for no check."""
    return cfg.get("accelerator", "gpu"), int(cfg.get("accelerator_count") or 0)


def gpus_seen(run: Callable = subprocess.run) -> tuple[int, str]:
    """(GPUs the driver lists, what nvidia-smi said when it listed none), counted as the toolkit counts them."""
    try:
        out = run(["nvidia-smi", "--list-gpus"], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S)
    except FileNotFoundError:
        return 0, "nvidia-smi is not installed (the image has no NVIDIA driver)"
    except subprocess.TimeoutExpired:
        return 0, f"nvidia-smi did not answer in {NVIDIA_SMI_TIMEOUT_S} s"
    count = sum(1 for line in out.stdout.splitlines() if re.match(r"GPU \d+:", line))
    said = " ".join((out.stdout + " " + out.stderr).split())[:300]
    if out.returncode != 0:
        return 0, said  # the toolkit's rule: a failing nvidia-smi means no GPU
    return count, said if count == 0 else ""


def cuda_visible(listed: int, env: Mapping[str, str]) -> int:
    """How many of the driver's `listed` GPUs CUDA shows a process with this environment: all, or the entries of
    CUDA_VISIBLE_DEVICES up to the first that names no device (CUDA ignores the rest; "" shows none)."""
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return listed
    shown = 0
    for entry in (e.strip() for e in raw.split(",")):
        if not entry or entry.startswith("-"):
            break
        shown += 1
    return min(listed, shown)


def neuron_devices_seen(root: str | None = None) -> int:
    root = root or os.environ.get("TRAINCTL_DEVICE_ROOT") or "/dev"
    try:
        return sum(1 for name in os.listdir(root) if re.fullmatch(r"neuron\d+", name))
    except OSError:
        return 0


def check(cfg: dict, say: Callable[[str], None], env: Mapping[str, str] | None = None) -> dict[str, int]:
    """The devices the training gets, {"num_gpus", "num_neurons"} (SM_NUM_GPUS, SM_NUM_NEURONS), once the node
    has every accelerator its type has; otherwise raise SystemExit with one line (the agent logs it, records the
    job as failed, and shuts the node down)."""
    env = os.environ if env is None else env
    kind, want = expected(cfg)
    where = cfg.get("instance_type") or "this instance type"
    gpus, said = gpus_seen()
    neuron = neuron_devices_seen() if kind == "neuron" else 0
    if want > 0 and kind == "gpu" and gpus < want:
        fail(gpus, want, "GPUs", where, said, "boot an image whose driver and CUDA support this GPU (`trainctl "
             "catalog` lists what each image drives; --ami gives another)")
    if want > 0 and kind == "neuron" and neuron < want:
        fail(neuron, want, "Neuron devices", where, "",
             "boot a Neuron DLAMI (its aws-neuronx-dkms driver makes /dev/neuron*)")
    offered = {"num_gpus": cuda_visible(gpus, env),
               # NeuronCores, as the toolkit's neuron-ls count: the launch's processes per node use them all
               "num_neurons": int(cfg.get("nproc_per_node") or 0) if kind == "neuron" and neuron else 0}
    if want > 0 and kind == "gpu":
        hidden = (f"; CUDA_VISIBLE_DEVICES={env.get('CUDA_VISIBLE_DEVICES')!r} shows the training "
                  f"{offered['num_gpus']} of them" if offered["num_gpus"] < gpus else "")
        say(f"trainctl-agent: {gpus} GPUs present, as {where} has{hidden} (SM_NUM_GPUS={offered['num_gpus']})")
    elif want > 0:
        say(f"trainctl-agent: {neuron} Neuron devices present, as {where} has "
            f"(SM_NUM_NEURONS={offered['num_neurons']})")
    return offered


def fail(got: int, want: int, what: str, where: str, said: str, fix: str) -> None:
    detail = f" ({said})" if said else ""
    raise SystemExit(f"trainctl-agent: this node sees {got} of the {want} {what} {where} has{detail}; it would "
                     f"train on the CPU, so it stops now: {fix}")
