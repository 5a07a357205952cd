"""Running the bundled training scripts as real processes, and killing them the way AWS does.

Shared by tests/test_entrypoint*.py. torchrun starts every rank in its own session, so a signal
to torchrun's process group never reaches the ranks: everything here works on explicit pids
found through /proc.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENTRYPOINTS = REPO / "trainctl" / "entrypoints"
TRAIN_DDP = ENTRYPOINTS / "train_ddp.py"
TRAIN_LM = ENTRYPOINTS / "train_lm.py"

METRIC_RE = re.compile(r"^trainctl step=(\d+) loss=([0-9.eE+-]+|nan|inf) samples_per_s=([0-9.]+)$",
                       re.M)
LM_METRIC_RE = re.compile(r"^trainctl step=(\d+) loss=([0-9.eE+-]+|nan|inf) "
                          r"samples_per_s=([0-9.]+) tokens_per_s=([0-9.]+)$", re.M)
MFU_RE = re.compile(r"^trainctl mfu=([0-9.]+) model_tflops_per_s=\S+ peak_tflops=([0-9.]+)$", re.M)
HASH_RE = re.compile(r"^trainctl final_state_sha256=([0-9a-f]{64})$", re.M)
STOPPED_RE = re.compile(r"^trainctl stopped rank=(\d+) step=(\d+) signal=(\S+) exit=0$", re.M)
RESUME_RE = re.compile(r"^trainctl resume step=(\d+) ", re.M)

# Generous ceilings so a broken script fails the test instead of hanging the suite; they are
# not performance assertions (a healthy run takes a few seconds).
RUN_TIMEOUT_S = 240


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SM_", "TORCHELASTIC_", "PET_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                         "MASTER_ADDR", "MASTER_PORT")}
    # Two ranks on a 2-core machine: one thread each, or they fight over the cores.
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def torchrun_cmd(script: Path, args: list[str], nproc: int = 2) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={nproc}", str(script), *args]


@dataclass
class Job:
    proc: subprocess.Popen
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait(self, timeout: float = RUN_TIMEOUT_S) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(f"job did not finish in {timeout}s:\n{self.text()[-4000:]}")


def start(cmd: list[str], log: Path, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> Job:
    handle = open(log, "wb")
    proc = subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT,
                            env=env or clean_env(), cwd=cwd or REPO)
    handle.close()
    return Job(proc, log)


def run_to_end(cmd: list[str], log: Path, env: dict[str, str] | None = None,
               cwd: Path | None = None) -> tuple[int, str]:
    job = start(cmd, log, env, cwd)
    code = job.wait()
    return code, job.text()


def children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue
        # The command name may contain spaces and parentheses: split after the last ')'.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    return children


def descendants(pid: int) -> list[int]:
    tree = children_map()
    found, todo = [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def rank_pids(torchrun_pid: int) -> dict[int, int]:
    """{global rank: pid} of the ranks that torchrun started (read from their environment)."""
    ranks = {}
    for pid in descendants(torchrun_pid):
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                environ = dict(item.split(b"=", 1) for item in handle.read().split(b"\0")
                               if b"=" in item)
        except OSError:
            continue
        if b"RANK" in environ and b"TORCHELASTIC_RUN_ID" in environ:
            ranks[int(environ[b"RANK"])] = pid
    return ranks


def kill_tree(pid: int, sig: int) -> list[int]:
    """Signal a process and all its descendants by pid (children first listed, then signalled
    together, so that none gets the chance to react by spawning or reparenting)."""
    pids = [pid, *descendants(pid)]
    for target in pids:
        try:
            os.kill(target, sig)
        except ProcessLookupError:
            pass
    return pids


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until(predicate, what: str, job: Job | None = None, timeout: float = RUN_TIMEOUT_S,
               interval: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if job is not None and job.proc.poll() is not None:
            raise AssertionError(f"job ended (rc={job.proc.returncode}) before {what}:\n"
                                 f"{job.text()[-4000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(interval)


def checkpoint_steps(directory: Path) -> list[int]:
    steps = []
    if directory.is_dir():
        for name in os.listdir(directory):
            match = re.match(r"^ckpt-(\d{10})-[0-9a-f]{16}\.pt$", name)
            if match:
                steps.append(int(match.group(1)))
    return sorted(steps)


def sharded_checkpoint_steps(directory: Path) -> list[int]:
    """Steps of complete sharded (train_lm.py) checkpoints: step-<10 digits> folders."""
    steps = []
    if directory.is_dir():
        for entry in directory.iterdir():
            match = re.match(r"^step-(\d{10})$", entry.name)
            if match and entry.is_dir():
                steps.append(int(match.group(1)))
    return sorted(steps)


def final_hash(text: str) -> str:
    hashes = HASH_RE.findall(text)
    assert len(hashes) == 1, f"expected one final_state_sha256 line:\n{text[-4000:]}"
    return hashes[0]


class Lazy:
    """A module loaded on its first attribute, so that a test file can name torch (or the scripts' modules) at its
    top and still cost nothing to collect: every pytest process, each xdist worker included, imports every test file,
    and torch's import alone is ~2 s of CPU."""

    def __init__(self, load):
        self._load, self._module = load, None

    def __getattr__(self, name: str):
        if name.startswith("_"):  # pytest's collection probes every global for its markers: that loads nothing
            raise AttributeError(name)
        if self._module is None:
            self._module = self._load()
        return getattr(self._module, name)


def import_common():
    """trainctl_common the way the scripts see it: a sibling module, not a package member."""
    if str(ENTRYPOINTS) not in sys.path:
        sys.path.insert(0, str(ENTRYPOINTS))
    import trainctl_common

    return trainctl_common
