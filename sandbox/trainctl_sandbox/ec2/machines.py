"""What a sandbox instance's hardware looks like from inside: the accelerators of its type, as its image lets it
see them.

On AWS a GPU is usable only through a driver that supports its architecture, and a DLAMI lists the families it
supports (DLAMI release notes, "supported_ec2_instances"; NVIDIA's open kernel modules of the OSS-driver DLAMIs need
Turing or newer, so no P3). A node booted from an image that does not list its family sees no GPU: `nvidia-smi`
fails ("couldn't communicate with the NVIDIA driver", exit 9) and CUDA finds no device. A Neuron image's
aws-neuronx-dkms driver makes one /dev/neuron<i> per Trainium chip; without it there is none.

Each node gets both, in its own root: `bin/nvidia-smi`, a stand-in answering `-L` as the driver would (one
`GPU <i>: <name> (UUID: ...)` line per GPU it drives), and `dev/` with the Neuron device files, named to the node
by TRAINCTL_DEVICE_ROOT. A node that cannot drive its GPU also gets CUDA_VISIBLE_DEVICES empty, as CUDA sees it.
An image the sandbox did not seed (the account's own, `--ami`) is taken to drive its instance's accelerators.

The driver's GPUs and CUDA's are two things here, as they are nowhere on AWS: a node's processes run on this
host, whose CUDA has the host's GPUs (none on a CPU host), not the instance type's. So the node's environment says
which GPUs CUDA shows them (CUDA_VISIBLE_DEVICES, NVIDIA's own variable), by the `cuda` setting
(`configure_instances`):
- "host" (the default): the host's GPUs, up to the type's count: on a CPU host none, so the node agent tells the
  training SM_NUM_GPUS=0 (it counts as SageMaker's toolkit counts, narrowed by CUDA_VISIBLE_DEVICES) and the
  bundled scripts run on the CPU, as the SageMaker sandbox's containers (num_gpus 0) do; on a GPU host, its GPUs;
- "all": every GPU of the type, as on AWS: on a CPU host the training is told it has GPUs that torch cannot see,
  which is how a test shows that a script never falls back to the CPU on a GPU node.
trainctl knows none of this: its agent reads nvidia-smi and CUDA_VISIBLE_DEVICES as on any node.
"""
from __future__ import annotations

import functools
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

CUDA_MODES = ("host", "all")
# moto's instance-type data has no GpuInfo for p3 and p3dn (EC2 User Guide, accelerated computing: V100 x1/4/8)
V100_COUNTS = {"p3.2xlarge": 1, "p3.8xlarge": 4, "p3.16xlarge": 8, "p3dn.24xlarge": 8}
NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
             "latest NVIDIA driver is installed and running.")

NVIDIA_SMI = """#!{python}
# `nvidia-smi` inside sandbox instance {instance} ({instance_type}, image {image}): the devices its driver sees.
import sys
gpus = {gpus!r}
if not gpus:
    print({no_driver!r})
    sys.exit(9)
if "-L" in sys.argv[1:] or "--list-gpus" in sys.argv[1:]:
    for i, (name, uuid) in enumerate(gpus):
        print(f"GPU {{i}}: {{name}} (UUID: {{uuid}})")
else:
    print(f"{{len(gpus)}} GPU(s): " + ", ".join(name for name, _ in gpus))
"""


def accelerators(instance_type: str) -> tuple[str, str, int]:
    """(kind "gpu"/"neuron"/"", device name, devices) of an instance type, from moto's EC2 instance-type data."""
    from trainctl_sandbox.server import ec2_data

    if instance_type in V100_COUNTS:
        return "gpu", "Tesla V100-SXM2-16GB", V100_COUNTS[instance_type]
    info = ec2_data.instance_type_info(instance_type) or {}
    gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
    if gpus:
        return "gpu", f"NVIDIA {gpus[0]['Name']}", sum(int(g.get("Count", 1)) for g in gpus)
    neuron = (info.get("NeuronInfo") or {}).get("NeuronDevices") or []
    if neuron:
        return "neuron", neuron[0].get("Name", "Trainium"), sum(int(d.get("Count", 1)) for d in neuron)
    return "", "", 0


def drives(region: str, image_id: str, instance_type: str) -> bool:
    """Whether the image lists the instance's family (a seeded DLAMI), or is one the sandbox knows nothing of."""
    from trainctl_sandbox.server import seed

    family = instance_type.split(".")[0]
    for d in seed.DLAMIS:
        if seed.ami_id(region, d.key) == image_id:
            return family in d.families
    return True


@functools.cache
def host_gpus() -> int:
    """GPUs of the machine the sandbox runs on, as its own driver lists them (0 without one)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        out = subprocess.run([smi, "--list-gpus"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU ")) if out.returncode == 0 else 0


def install(root: Path, instance: Any, region: str, cuda: str = "host") -> dict[str, str]:
    """Write the node's stand-in nvidia-smi and device files under `root`; returns the environment they need."""
    kind, name, count = accelerators(instance.instance_type)
    seen = count if kind and drives(region, instance.image_id, instance.instance_type) else 0
    gpus = [(name, "GPU-" + hashlib.blake2b(f"{instance.id}/{i}".encode(), digest_size=16).hexdigest())
            for i in range(seen if kind == "gpu" else 0)]
    smi = root / "bin" / "nvidia-smi"
    if kind == "gpu":  # only a GPU image has the tool; a Neuron or CPU node finds none
        smi.write_text(NVIDIA_SMI.format(python=sys.executable, instance=instance.id, image=instance.image_id,
                                         instance_type=instance.instance_type, gpus=gpus, no_driver=NO_DRIVER))
        smi.chmod(0o755)
    dev = root / "dev"
    dev.mkdir(exist_ok=True)
    for i in range(seen if kind == "neuron" else 0):
        (dev / f"neuron{i}").touch()
    env = {"TRAINCTL_DEVICE_ROOT": str(dev)}
    if kind == "gpu":
        shown = len(gpus) if cuda == "all" else min(len(gpus), host_gpus())
        if shown < count:  # CUDA's own default is every device: say so only where it shows fewer
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(shown))
    return env
