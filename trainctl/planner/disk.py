"""Pure: the disk each node of a layout needs, and the volume that holds it, or why none can.

A node holds the channels it copies (File mode on SageMaker, `copy` on EC2: its part when sharded), the last K
checkpoints the entrypoint keeps (the whole state under DDP, the node's shard under FSDP), the final model and
its archive (model.tar.gz), and scratch (the code, pip installs, logs).
- SageMaker: types with NVMe instance storage use it, at its fixed size, and no EBS volume; the others get
  `VolumeSizeInGB`, which "must define the size of the EBS volume" (botocore `sagemaker` ResourceConfig).
- EC2: the root volume (the AMI's RootDeviceName: backends/ec2/image_facts.py) holds the image and all the above.
Over the largest EBS volume (16 TiB: EBS User Guide, "Amazon EBS volume types", gp2/gp3 maximum size), or over a
type's instance storage on SageMaker, the layout cannot run: the plan leaves it out with the reason, so `launch`
and `doctor` refuse before anything is created.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from trainctl import perf
from trainctl.catalog.instance_storage import instance_storage_gb
from trainctl.catalog.platforms import facts

GIB = 1024 ** 3
SCRATCH_GIB = 20.0           # ASSUMED: code, pip installs, logs, core dumps
IMAGE_ROOT_GIB = 100.0       # ASSUMED: what a Deep Learning AMI itself fills of its root volume
EC2_MIN_ROOT_GIB = 200       # trainctl's root volume when the job needs less (backends/ec2/prepare.py)
SAGEMAKER_MIN_GB = 50        # trainctl's SageMaker volume when the job needs less
EBS_MAX_GIB = 16384
DEFAULT_KEEP = 3             # checkpoints the node agent keeps when the entrypoint says nothing (bootstrap/agent.py)
MODEL_BYTES_PER_PARAM = 4.0  # the saved model: fp32 weights


@dataclass(frozen=True)
class Disk:
    need_gib: float
    volume_gb: int | None     # what to ask for (SageMaker VolumeSizeInGB / EC2 root GiB); None: instance storage
    words: str
    refusal: str | None = None


def has_fsx(spec) -> bool:
    """An FSx for Lustre channel: mounted, not copied (no disk), and on EC2 it needs the image's Lustre client."""
    from trainctl.spec.data import FsxChannel

    return any(isinstance(s, FsxChannel) for s in (spec.data or {}).values())


def keep_of(spec) -> int:
    args = getattr(spec.entrypoint, "args", None) or {}
    return int(args.get("keep") or DEFAULT_KEEP)


def need(shape, copy_bytes: float, keep: int, count: int, strategy: str) -> tuple[float, str]:
    """(GiB per node, the parts in words)."""
    state = shape.params * perf.state_bytes_per_param(shape.optimizer) / (count if strategy in perf.SHARDED else 1)
    model = 2 * shape.params * MODEL_BYTES_PER_PARAM   # the model and its archive
    parts = {"copied data": copy_bytes, f"{keep} checkpoints": keep * state, "model": model,
             "scratch": SCRATCH_GIB * GIB}
    total = sum(parts.values()) / GIB
    return total, ", ".join(f"{name} {value / GIB:,.1f}" for name, value in parts.items() if value)


def plan_disk(platform: str, instance_type: str, shape, copy_bytes: float, keep: int, count: int,
              strategy: str) -> Disk:
    gib, parts = need(shape, copy_bytes, keep, count, strategy)
    said = f"disk: {gib:,.0f} GiB per node ({parts} GiB)"
    own = facts(platform)
    if own.disk == "training-volume":
        storage = instance_storage_gb(instance_type) or 0
        if storage:
            if gib * GIB / 1e9 > storage:
                return Disk(gib, None, said, f"needs {gib * GIB / 1e9:,.0f} GB of disk per node ({parts} GiB); "
                                               f"{own.type_prefix}{instance_type} has {storage:,} GB of NVMe instance "
                                               f"storage, which {own.title} uses instead of EBS: a type with more, or "
                                               "stream the data (data.<channel>.mode: stream)")
            return Disk(gib, None, f"{said} on its {storage:,} GB of NVMe instance storage")
        size = max(SAGEMAKER_MIN_GB, math.ceil(gib * GIB / 1e9))
        where = f"VolumeSizeInGB {size:,}"
    else:
        size = max(EC2_MIN_ROOT_GIB, math.ceil(gib + IMAGE_ROOT_GIB))
        where = f"a {size:,} GiB root volume (the image's ~{IMAGE_ROOT_GIB:.0f} included)"
    if size > EBS_MAX_GIB:
        return Disk(gib, None, said, f"needs {size:,} GiB of disk per node ({parts} GiB), over EBS's "
                                     f"{EBS_MAX_GIB:,} GiB volume: stream the data (data.<channel>.mode: stream) or "
                                     "keep fewer checkpoints (--keep)")
    return Disk(gib, size, f"{said} on {where}")
