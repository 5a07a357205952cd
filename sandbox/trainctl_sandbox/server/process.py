"""The sandbox as an operating-system process: start it detached, find it, stop it and all it started.

No moto, no boto3 (the CLI and the test fixtures use this without paying for them); psutil walks and
signals process trees.
A running sandbox is described by two files under `$TRAINCTL_HOME/sandbox/` (default ~/.trainctl):
`sandbox.pid` and `state.json` ({"port", "pid", "started", "endpoint_url", "seed", "workdir", "log", "restored"}).
The server writes both once it is listening and removes them when it stops; `account.pickle` there keeps the
account between runs (persist.py).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil

HOST = "127.0.0.1"
DEFAULT_PORT = 5123
PID_FILE = "sandbox.pid"
STATE_FILE = "state.json"
LOG_FILE = "server.log"
# Credentials the sandbox accepts (moto maps any key to account 123456789012); never real ones.
FAKE_ACCESS_KEY = "testing"
FAKE_SECRET_KEY = "testing"
DEFAULT_REGION = "us-east-1"


class SandboxProcessError(RuntimeError):
    """The sandbox could not be started or reached; the message says why and what to do."""


def home() -> Path:
    return Path(os.environ.get("TRAINCTL_HOME") or Path.home() / ".trainctl")


def state_dir(base: Path | None = None) -> Path:
    return (base or home()) / "sandbox"


def sandbox_env(endpoint_url: str) -> dict[str, str]:
    """The environment that points boto3, the AWS CLI and trainctl at the sandbox."""
    return {"AWS_ENDPOINT_URL": endpoint_url, "AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_KEY, "AWS_DEFAULT_REGION": DEFAULT_REGION, "TRAINCTL_SANDBOX": "1"}


def env_lines(env: dict[str, str]) -> list[str]:
    return [f"export {k}={v}" for k, v in env.items()]


# ----------------------------------------------------------------------------- state files
def write_state(directory: Path, state: dict) -> None:
    """Write state.json and sandbox.pid atomically (a reader never sees half a file)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in ((STATE_FILE, json.dumps(state, indent=2)), (PID_FILE, str(state["pid"]))):
        tmp = directory / f".{name}.{os.getpid()}.tmp"
        tmp.write_text(text)
        tmp.replace(directory / name)


def read_state(directory: Path) -> dict | None:
    try:
        return json.loads((directory / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None


def read_pid(directory: Path) -> int | None:
    try:
        return int((directory / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def remove_state(directory: Path, pid: int | None = None) -> None:
    """Remove the files, but only those of `pid` when given (a newer sandbox may have replaced them)."""
    if pid is not None and read_pid(directory) not in (None, pid):
        return
    for name in (STATE_FILE, PID_FILE):
        try:
            (directory / name).unlink()
        except FileNotFoundError:
            pass


# ----------------------------------------------------------------------------- probing
def is_alive(pid: int) -> bool:
    """Whether `pid` runs (see _running)."""
    try:
        return _running(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return False


def _running(proc: psutil.Process) -> bool:
    """Whether the process runs. is_running() is False once its pid names a newer process; a zombie
    (exited, not yet reaped by its parent) does not run: where pid 1 reaps nothing (some containers),
    the orphans of a killed job stay zombies for good."""
    try:
        return proc.is_running() and proc.status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # another user's process: it exists
        return True


def running(directory: Path | None = None) -> dict | None:
    """The state of the sandbox running from `directory`, if its process lives and answers."""
    from trainctl_sandbox.admin import SandboxAdmin, SandboxAdminError  # urllib: only when talking to it

    directory = directory or state_dir()
    state = read_state(directory)
    if not state or not is_alive(int(state["pid"])):
        return None
    try:
        info = SandboxAdmin(state["endpoint_url"], timeout=2.0).info()
    except (OSError, ValueError, SandboxAdminError):
        return None
    return state if info.get("pid") == state["pid"] else None


def port_free(port: int) -> bool:
    """Whether a server may listen on `port` now. SO_REUSEADDR, as the server's own socket has it (werkzeug's
    HTTPServer): a port whose last sandbox just stopped holds connections in TIME_WAIT for a minute, which do
    not stop a new listener; another listener does."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


# ----------------------------------------------------------------------------- start / stop
def start_detached(port: int = DEFAULT_PORT, seed: int = 0, directory: Path | None = None,
                   parent_pid: int | None = None, timeout: float = 60.0, wait_ec2: bool = False,
                   fresh: bool = False) -> dict:
    """Start the server in a new session (it outlives this process) and wait until it answers.

    parent_pid: the server stops by itself when that process ends (test sessions use it, so that
    no server outlives a crashed pytest). wait_ec2: also wait for the EC2 warm-up."""
    from trainctl_sandbox.admin import SandboxAdmin

    directory = directory or state_dir()
    directory.mkdir(parents=True, exist_ok=True)
    log_path = directory / LOG_FILE
    cmd = [sys.executable, "-m", "trainctl_sandbox.server.main", "--port", str(port), "--seed", str(seed),
           "--state-dir", str(directory)]
    if parent_pid:
        cmd += ["--parent-pid", str(parent_pid)]
    if fresh:  # a new account, not the one the last sandbox of this folder kept (persist.py)
        cmd += ["--fresh"]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace").splitlines()[-15:]
            raise SandboxProcessError(f"the sandbox server exited with status {proc.returncode}; "
                                      f"last lines of {log_path}:\n" + "\n".join(tail))
        state = read_state(directory)
        if state and state.get("pid") == proc.pid:
            if wait_ec2:
                left = max(1.0, deadline - time.monotonic())
                SandboxAdmin(state["endpoint_url"], timeout=left + 1).wait_ready(left)
            return state
        time.sleep(0.02)
    kill_tree(proc.pid)
    raise SandboxProcessError(f"the sandbox server did not answer within {timeout:.0f}s; see {log_path}")


def descendants(pid: int) -> list[psutil.Process]:
    """Every process below `pid` (children, grandchildren, ...); none when `pid` is gone."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _tree(pid: int) -> list[psutil.Process]:
    """`pid` and its descendants, listed before anything is signalled (orphans would escape)."""
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return []
    return [root, *descendants(pid)]


def _wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    # not psutil.wait_procs: it waits for a zombie that is not our child until the timeout
    deadline = time.monotonic() + timeout
    alive = [p for p in procs if _running(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if _running(p)]
    return alive


def _signal_all(procs: list[psutil.Process], sig: int) -> None:
    for proc in procs:
        try:
            proc.send_signal(sig)  # psutil checks first that the pid still names the same process
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass


def kill_tree(pid: int, grace: float = 3.0) -> None:
    """SIGTERM a process and all its descendants, then SIGKILL what is left after `grace`."""
    _kill(_tree(pid), grace)


def _kill(procs: list[psutil.Process], grace: float) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        _signal_all(procs, sig)
        procs = _wait_gone(procs, grace)
        if not procs:
            return


def stop(directory: Path | None = None, timeout: float = 10.0, grace: float = 3.0) -> int | None:
    """Stop the sandbox of `directory` and every process it started; the pid it had, or None if none ran.

    timeout: how long the server may take to stop by itself; grace: then how long each leftover
    process gets between SIGTERM and SIGKILL."""
    from trainctl_sandbox.admin import SandboxAdmin, SandboxAdminError  # urllib: only when talking to it

    directory = directory or state_dir()
    pid = read_pid(directory)
    state = read_state(directory) or {}
    if pid is None or not is_alive(pid):
        remove_state(directory)
        return None
    tree = _tree(pid)  # before it exits: its children would be re-parented and lost
    try:
        # A graceful stop lets the server stop its jobs itself (SageMaker job processes).
        SandboxAdmin(state.get("endpoint_url", ""), timeout=2.0).shutdown()
    except (OSError, ValueError, SandboxAdminError):
        pass
    _wait_gone(tree[:1], timeout)
    # the server if it did not stop, whatever it started that outlived it, and what those started since
    leftovers = {p.pid: p for proc in tree if _running(proc) for p in [proc, *descendants(proc.pid)]}
    _kill(list(leftovers.values()), grace)
    remove_state(directory, pid)
    return pid
