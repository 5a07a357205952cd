"""The processes of sandbox SageMaker jobs: find them by their marker, signal and kill them.

Every process a job starts carries MARKER_ENV in its environment, so the job can find and kill all of
them, including ranks that torchrun starts in sessions of their own (killing torchrun's session alone
leaves them running). psutil reads the environments and walks the process trees.
"""
from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

import psutil

MARKER_ENV = "TRAINCTL_SANDBOX_JOB"

_ENDED = (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)


def marked_pids(prefix: str) -> list[int]:
    """Live (non-zombie) processes whose MARKER_ENV value starts with `prefix`."""
    me = os.getpid()
    found = []
    # environ is None where it cannot be read (another user's process); a zombie's is empty
    for proc in psutil.process_iter(["environ", "status"]):
        env = proc.info["environ"] or {}
        if (proc.pid != me and env.get(MARKER_ENV, "").startswith(prefix)
                and proc.info["status"] not in (None, *_ENDED)):
            found.append(proc.pid)
    return sorted(found)


def descendants(root: int) -> list[int]:
    """root's live descendants (catches children that dropped MARKER_ENV)."""
    try:
        children = psutil.Process(root).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [child.pid for child in children]


def signal_pids(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def kill_marked(prefix: str, rounds: int = 20) -> None:
    """SIGKILL every marked process until none is left (a dying torchrun may still fork)."""
    for _ in range(rounds):
        pids = marked_pids(prefix)
        if not pids:
            return
        signal_pids(pids, signal.SIGKILL)
        time.sleep(0.05)


# A job's ports on the shared 127.0.0.1: on AWS each node has an address of its own, so every port is the job's;
# the sandbox's nodes share one, so each job gets a block of PORT_BLOCK ports below the kernel's ephemeral range
# (net.ipv4.ip_local_port_range starts at 32768 by default), where no connection's own port lands. A node may use
# any port of its block (the agent moves its master port on with each membership generation). Sandboxes run side
# by side (one per test worker), so a block is held with a lock file (flock) for as long as this process runs.
PORT_BLOCK, BLOCKS_FROM, BLOCKS_TO = 100, 20000, 32700
_HELD: dict[int, int] = {}   # first port of a block -> the descriptor of its lock, held by this process


def port_block(taken: set[int]) -> int:
    """The first port of a block that no other process holds and no job of this one (`taken`) uses."""
    locks = Path(tempfile.gettempdir()) / "trainctl-sandbox-ports"
    locks.mkdir(exist_ok=True)
    for base in range(BLOCKS_FROM, BLOCKS_TO, PORT_BLOCK):
        if base in taken:
            continue
        if base not in _HELD:
            fd = os.open(locks / f"{base}.lock", os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            _HELD[base] = fd
        if all(_bindable(port) for port in range(base, base + PORT_BLOCK)):
            return base  # free now as well: a node left over from a server that died may still hold a port
    return free_port()  # every block in use: any free port, as before


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def terminate(marker: str, procs: list[subprocess.Popen], grace: float, aborted: Callable[[], bool]) -> None:
    """SIGTERM every process of a job (its marked ones, the host processes and their descendants), wait
    up to `grace` (less when the job is aborted), then SIGKILL what is left and reap the host processes."""
    pids = set(marked_pids(marker))
    for proc in procs:
        if proc.poll() is None:
            pids.add(proc.pid)
            pids.update(descendants(proc.pid))
    signal_pids(sorted(pids), signal.SIGTERM)
    deadline = time.time() + grace
    while time.time() < deadline and not aborted():
        if all(proc.poll() is not None for proc in procs) and not marked_pids(marker):
            break
        time.sleep(0.05)
    kill_marked(marker)
    for proc in procs:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
