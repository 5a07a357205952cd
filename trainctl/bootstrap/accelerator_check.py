"""The node agent's first check: the accelerators the plan paid for are there, before anything else runs.

SageMaker checks its instances' GPUs before a job's script starts (SageMaker Developer Guide, "Training job
health checks and automatic restarts": deep health checks of the GPUs and NVLink); an EC2 node has only the
agent. A node whose image cannot drive its GPUs (a driver without the card's architecture, a CUDA that dropped
it) sees none: `nvidia-smi -L` fails with "couldn't communicate with the NVIDIA driver" or lists fewer, and a
script that picks `"cuda" if torch.cuda.is_available() else "cpu"` trains on the CPU until its budget ends it.
So the agent counts the devices and fails the node in seconds, with the reason, instead.

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
from collections.abc import Callable

NVIDIA_SMI_TIMEOUT_S = 60   # nvidia-smi answers in about a second; a hung driver must not hold the node


def expected(cfg: dict) -> tuple[str, int]:
    """(accelerator kind, devices the instance type has: GPUs, or Neuron chips), as the launch wrote them into the
    node config (backends/ec2/prepare.py); a config without `accelerator_count` asks for no check."""
    return cfg.get("accelerator", "gpu"), int(cfg.get("accelerator_count") or 0)


def gpus_seen(run: Callable = subprocess.run) -> tuple[int, str]:
    """(GPUs the driver lists, what nvidia-smi said when it listed none)."""
    try:
        out = run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S)
    except FileNotFoundError:
        return 0, "nvidia-smi is not installed (the image has no NVIDIA driver)"
    except subprocess.TimeoutExpired:
        return 0, f"nvidia-smi did not answer in {NVIDIA_SMI_TIMEOUT_S} s"
    count = sum(1 for line in out.stdout.splitlines() if re.match(r"GPU \d+:", line))
    said = " ".join((out.stdout + " " + out.stderr).split())[:300]
    return count, said if out.returncode != 0 or count == 0 else ""


def neuron_devices_seen(root: str | None = None) -> int:
    root = root or os.environ.get("TRAINCTL_DEVICE_ROOT") or "/dev"
    try:
        return sum(1 for name in os.listdir(root) if re.fullmatch(r"neuron\d+", name))
    except OSError:
        return 0


def check(cfg: dict, say: Callable[[str], None]) -> None:
    """Return when the node has every accelerator its type has; otherwise raise SystemExit with one line (the
    agent logs it, records the job as failed, and shuts the node down)."""
    kind, want = expected(cfg)
    if want <= 0 or kind not in ("gpu", "neuron"):
        return  # a CPU type: nothing to count
    where = cfg.get("instance_type") or "this instance type"
    if kind == "gpu":
        got, said = gpus_seen()
        what, fix = "GPUs", ("boot an image whose driver and CUDA support this GPU (`trainctl catalog` lists what "
                             "each image drives; --ami gives another)")
    else:
        got, said = neuron_devices_seen(), ""
        what, fix = "Neuron devices", "boot a Neuron DLAMI (its aws-neuronx-dkms driver makes /dev/neuron*)"
    if got >= want:
        say(f"trainctl-agent: {got} {what} present, as {where} has")
        return
    detail = f" ({said})" if said else ""
    raise SystemExit(f"trainctl-agent: this node sees {got} of the {want} {what} {where} has{detail}; it would "
                     f"train on the CPU, so it stops now: {fix}")
