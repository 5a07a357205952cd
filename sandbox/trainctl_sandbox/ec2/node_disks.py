"""A sandbox node's disk: its root volume, with the volume's size, so that a node whose data does not fit fails as
a full disk does on AWS (a write gets ENOSPC, "No space left on device").

The node's folder (nodes.py: what its processes see as /opt/ml, /opt/trainctl, its HOME and its PATH's tools) is
a tmpfs mounted with `size=` the free part of its root volume: the VolumeSize of the instance's mapping at the
image's RootDeviceName (root_volumes.py: an extra volume under another name holds nothing the node writes), less
what the image itself fills. tmpfs was chosen over the alternatives because it is exact and needs nothing but root:
RLIMIT_FSIZE bounds one file, not a disk, and fails with EFBIG and SIGXFSZ, not ENOSPC; a loop-mounted ext4
image needs loop devices, which containers often lack; counting writes would need a FUSE layer. A tmpfs `size` is a
limit, not a reservation: a node takes memory only for what it writes, and gives it back when the instance ends
(its volume is deleted on termination, as trainctl's launch template asks), or when the sandbox stops.

The sandbox scale: real GiB by default. A test cannot write 120 GiB, so `configure_instances(disk_gib_bytes=N)`
(or TRAINCTL_SANDBOX_DISK_GIB_BYTES) makes each GiB of a volume N bytes on the node, for the volume and the image's
fill alike. Under it only a job's deliberate overrun compares as on AWS: the data a job really copies and writes
is not scaled (trainctl sizes the disk from S3's real object sizes), so a test that uses the scale keeps its own
data far below the scaled disk and writes more than the plan on purpose.

A tmpfs keeps its files in memory: a sandbox run whose nodes write gigabytes (a benchmark's ViT-B checkpoints on
several nodes) may switch the model off with a scale of 0 (plain folders, no size), and the log says so once.

Without root (or where the mount is refused) a node's folder is a plain folder with no limit, and the server's
log says so once, as for the private /opt/ml (private_mounts.py).
"""
from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path
from typing import Any

GIB = 1024 ** 3
SCALE_ENV = "TRAINCTL_SANDBOX_DISK_GIB_BYTES"
# ASSUMED: what a seeded Deep Learning AMI itself fills of its root volume (its OS, drivers, framework environments);
# its root snapshot is root_volumes.IMAGE_ROOT_GIB. An image the sandbox did not seed is taken to fill as much.
IMAGE_USED_GIB = 80
_log = logging.getLogger("trainctl_sandbox")
_said: set[str] = set()


def default_gib_bytes() -> int:
    return int(os.environ.get(SCALE_ENV) or GIB)


def root_gib(instance: Any) -> int | None:
    """GiB of the volume at the instance's image's root device; None when the sandbox cannot tell."""
    backend = instance.ec2_backend
    image = backend.amis.get(instance.image_id)
    device = getattr(image, "root_device_name", None)
    mapping = instance.block_device_mapping.get(device) if device else None
    if mapping is None:
        return None
    try:
        return int(backend.get_volume(mapping.volume_id).size)
    except Exception:  # noqa: BLE001 - a volume moto no longer knows: no limit rather than a wrong one
        return None


def free_bytes(instance: Any, gib_bytes: int) -> int | None:
    """Bytes the node may write: its root volume less the image's own files (never less than one scaled MiB:
    a full root still boots, as a node whose image filled its root does, and fails at its first write)."""
    size = root_gib(instance)
    if size is None or gib_bytes <= 0:
        return None
    return max(gib_bytes // 1024, (size - IMAGE_USED_GIB) * gib_bytes)


def mount(root: Path, size: int | None) -> bool:
    """Make `root` a filesystem of `size` bytes; False (said once) when it cannot be, and `root` is a plain folder."""
    root.mkdir(parents=True, exist_ok=True)
    why = unavailable() if size is not None else "switched off, or the root volume unknown"
    if why is None and size is not None:
        unmount(root)  # a folder left mounted by a sandbox that was killed
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(root)],
                              capture_output=True, text=True, timeout=30)
        if done.returncode == 0:
            return True
        why = f"mount -t tmpfs failed: {done.stderr.strip()[:200]}"
    if why not in _said:
        _said.add(why)
        _log.warning("EC2 nodes' disks have no size here (%s): a node's data is never refused for room", why)
    return False


def unmount(root: Path) -> None:
    """The volume goes: lazily, so that a process still holding a file in it does not keep it mounted here."""
    if os.path.ismount(root):
        subprocess.run(["umount", "-l", str(root)], capture_output=True, timeout=30, check=False)


def unmount_all(folder: Path) -> None:
    """Every node's volume under `folder` (the sandbox stops or resets: its instances are gone)."""
    for root in folder.iterdir() if folder.is_dir() else ():
        unmount(root)


def unavailable() -> str | None:
    if os.name != "posix" or os.geteuid() != 0:
        return "the sandbox is not running as root"
    return None
