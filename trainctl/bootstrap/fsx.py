"""An FSx for Lustre channel on an EC2 node: the file system mounted read-only where SageMaker's
FileSystemDataSource puts it, /opt/ml/input/data/NAME (and $SM_CHANNEL_NAME), so a script reads the same path
on both platforms.

The mount is the one the FSx for Lustre User Guide gives ("Mounting from an Amazon EC2 instance"):
`mount -t lustre -o relatime,flock DNSNAME@tcp:/MOUNTNAME /mnt`, here with `ro` (the channel is read-only, as
SageMaker's `FileSystemAccessMode: ro`) and the channel's directory after the mount name: mount.lustre(8) takes
MGSNAME:/FSNAME[/SUBDIR] and mounts the file system starting at that directory (the guide's "Mounting specific
filesets"). The launch put the file system's DNS name and mount name in the config (DescribeFileSystems, which
its checks call anyway), so the node needs no FSx permission.

`mount -t lustre` runs the Lustre client's mount helper, mount.lustre. Where the node has none, the agent installs
the client as the guide says for Amazon Linux 2023 (`dnf install -y lustre-client`, the GPU DLAMI trainctl
launches); on another OS it stops with one line naming the guide's page. A mount that fails stops the node
through the agent's failure path (never a training run on an empty folder).
"""
from __future__ import annotations

import os
import shutil
import subprocess

MOUNT_OPTIONS = "ro,relatime,flock"
MOUNT_TIMEOUT_S = 300     # mount.lustre retries an unreachable file system for minutes; bound it
INSTALL_TIMEOUT_S = 900
# Where a root shell finds mount helpers; the agent's PATH need not name them.
SBIN = ("/sbin", "/usr/sbin")
GUIDE = "FSx for Lustre User Guide, Installing the Lustre client"


def lustre_source(channel: dict) -> str:
    """DNSNAME@tcp:/MOUNTNAME/DIR: the spec's path starts with the mount name (the launch checked it)."""
    return f"{channel['dns_name']}@tcp:{channel['path']}"


def mount_command(channel: dict, dest: str) -> list[str]:
    return ["mount", "-t", "lustre", "-o", MOUNT_OPTIONS, lustre_source(channel), dest]


def _search_path() -> str:
    return os.pathsep.join([os.environ.get("PATH", ""), *SBIN])


def os_release(path: str = "/etc/os-release") -> dict[str, str]:
    try:
        with open(path) as f:
            pairs = [line.rstrip("\n").split("=", 1) for line in f if "=" in line]
    except OSError:
        return {}
    return {k: v.strip('"') for k, v in pairs}


def ensure_client(log) -> None:
    """mount.lustre on the node, installed from the OS's repository on Amazon Linux 2023."""
    if shutil.which("mount.lustre", path=_search_path()):
        return
    release = os_release()
    if (release.get("ID"), release.get("VERSION_ID")) != ("amzn", "2023"):
        raise SystemExit(f"trainctl-agent: no Lustre client (mount.lustre) on this node "
                         f"({release.get('PRETTY_NAME', 'unknown OS')}); use an AMI with it installed ({GUIDE})")
    log("trainctl-agent: installing the Lustre client (dnf install -y lustre-client)")
    done = subprocess.run(["dnf", "install", "-y", "lustre-client"], check=False, capture_output=True, text=True,
                          timeout=INSTALL_TIMEOUT_S)
    if done.returncode != 0 or not shutil.which("mount.lustre", path=_search_path()):
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise SystemExit(f"trainctl-agent: could not install the Lustre client: {tail[0][:200]} ({GUIDE})")


def mount(name: str, channel: dict, dest: str, log) -> None:
    """The channel's directory mounted read-only at dest; SystemExit (the agent's failure path) if it is not."""
    ensure_client(log)
    cmd = mount_command(channel, dest)
    try:
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=MOUNT_TIMEOUT_S,
                              env=dict(os.environ, PATH=_search_path()))
        why = " ".join((done.stderr or done.stdout).split())[:300] if done.returncode else ""
    except subprocess.TimeoutExpired:
        why = f"no answer in {MOUNT_TIMEOUT_S} s"
    if why:
        groups = " ".join(["security groups", *(channel.get("security_groups") or [])])
        raise SystemExit(f"trainctl-agent: channel {name}: mounting FSx for Lustre {channel['fsx']} "
                         f"({lustre_source(channel)}) at {dest} failed: {why}; check the mount name and the "
                         f"directory, and that the file system's {groups} let TCP 988 and 1018-1023 in from this "
                         "node")
    log(f"trainctl-agent: channel {name}: FSx for Lustre {channel['fsx']} {channel['path']} mounted read-only "
        f"at {dest} ({' '.join(cmd[:5])})")
