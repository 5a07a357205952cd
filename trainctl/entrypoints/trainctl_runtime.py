"""The run-time pieces every bundled script shares: output lines, the Spot-notice flag, the
process layout with its control collectives, the device interface, seeds and RNG state.

Plain module beside the scripts (``import trainctl_runtime``), like the rest of this folder.
"""

from __future__ import annotations

import abc
import argparse
import contextlib
import hashlib
import os
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.distributed as dist

# --------------------------------------------------------------------------------------------
# Output: one line per event, prefixed "trainctl " so that `trainctl watch` can parse host logs.
# --------------------------------------------------------------------------------------------

def emit(message: str) -> None:
    """A machine-readable line on stdout (flushed: logs are tailed live from CloudWatch).

    One write per line: print() writes the text and the newline separately, and ranks that
    share a log file (torchrun's stdout) could then interleave their lines."""
    sys.stdout.write(f"trainctl {message}\n")
    sys.stdout.flush()


def warn(message: str, rank: int | None = None) -> None:
    where = "" if rank is None else f" rank={rank}"
    sys.stderr.write(f"trainctl warning{where}: {message}\n")
    sys.stderr.flush()


# --------------------------------------------------------------------------------------------
# Spot notice
# --------------------------------------------------------------------------------------------

class StopSignal:
    """Remembers that SIGTERM arrived; the training loop acts on it at the next step boundary.

    The handler only sets a flag: it may run at any bytecode of the main thread (inside a
    print, inside torch.save), so doing I/O or raising there could corrupt state. It is also
    idempotent: SageMaker signals the whole process tree and torchrun forwards its own SIGTERM
    to every rank, so a rank commonly receives the notice twice.
    """

    def __init__(self) -> None:
        self.signal_name: str | None = None

    @property
    def requested(self) -> bool:
        return self.signal_name is not None

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signal_name is None:
            self.signal_name = signal.Signals(signum).name

    def install(self, signums: Sequence[int] = (signal.SIGTERM,),
                early: Sequence[int] = ()) -> "StopSignal":
        """Take over from a script's first-line handler; ``early`` is what it caught. On a SageMaker
        training plan, the plan's end is a notice too (``capacity_end_at``)."""
        for signum in signums:
            signal.signal(signum, self._handle)
        for signum in early:
            self._handle(signum, None)
        at = capacity_end_at(os.environ)
        if at is not None:
            timer = threading.Timer(max(0.0, at - time.time()), self._capacity_end)
            timer.daemon = True
            timer.start()
        return self

    def _capacity_end(self) -> None:
        if self.signal_name is None:
            self.signal_name = CAPACITY_END


# A SageMaker training plan's reserved capacity ends at SAGEMAKER_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP
# (epoch milliseconds, set in the container), and SageMaker terminates its instances from 30 minutes before
# (Developer Guide, "Training plans utilization for SageMaker training jobs", which asks the script to checkpoint
# before then). The script stops 40 minutes before the end, as an EC2 node does at a Capacity Block's end
# (bootstrap/block_end.py): 10 minutes for the checkpoint and its upload. It then exits non-zero (CAPACITY_END_EXIT):
# exiting 0 would have SageMaker report the unfinished job Completed.
CAPACITY_END_ENV = "SAGEMAKER_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP"
CAPACITY_END = "capacity-end"
CAPACITY_STOP_LEAD_S = 40 * 60
CAPACITY_END_EXIT = 3


def capacity_end_at(env) -> float | None:
    """When to stop for the training plan's end (epoch seconds), or None outside a plan."""
    raw = str(env.get(CAPACITY_END_ENV) or "0")
    try:
        end_ms = int(raw)
    except ValueError:
        return None
    return end_ms / 1000.0 - CAPACITY_STOP_LEAD_S if end_ms > 0 else None


def stopped_exit(outcome: str, rank: int, step: int) -> int:
    """The exit code of a run stopped by `outcome` (0 on a Spot notice: the platform resumes it), with its line."""
    if outcome != CAPACITY_END:
        emit(f"stopped rank={rank} step={step} signal={outcome} exit=0")
        return 0
    emit(f"stopped rank={rank} step={step} signal={outcome} exit={CAPACITY_END_EXIT}")
    if rank == 0:
        sys.stderr.write(f"trainctl: stopped at step {step} before the training plan's end (SageMaker terminates its "
                         "instances from 30 minutes before it); the checkpoint is saved: resume with `trainctl launch "
                         "SPEC --resume-from JOB`\n")
    return CAPACITY_END_EXIT


# --------------------------------------------------------------------------------------------
# Process layout and control collectives
# --------------------------------------------------------------------------------------------

@dataclass
class DistContext:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    # A gloo group for control messages (stop/checkpoint agreement, RNG gathering, loss
    # averaging). On GPU and XLA this keeps those tiny messages off the accelerator, so asking
    # "did anyone get SIGTERM?" every step does not stall the device queue.
    control_group: Any = None

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "DistContext":
        env = os.environ if env is None else env
        world = int(env.get("WORLD_SIZE", "1"))
        return cls(
            rank=int(env.get("RANK", "0")),
            world_size=world,
            local_rank=int(env.get("LOCAL_RANK", "0")),
            local_world_size=int(env.get("LOCAL_WORLD_SIZE", str(world))),
        )

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def is_writer(self) -> bool:
        # One writer per node: checkpoint folders are node-local (EC2 instance storage, each
        # SageMaker host's own /opt/ml/checkpoints), so every node keeps its own copy to resume
        # from. Writers sharing one folder are harmless: unique temp names, atomic renames.
        return self.local_rank == 0

    def make_control_group(self) -> None:
        if self.distributed:
            self.control_group = dist.new_group(backend="gloo")

    def sum(self, values: Sequence[float]) -> list[float]:
        """Element-wise sum over all ranks (float64 on the CPU)."""
        if not self.distributed:
            return [float(v) for v in values]
        tensor = torch.tensor(list(values), dtype=torch.float64)
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=self.control_group)
        return tensor.tolist()

    def all_true(self, flag: bool) -> bool:
        return self.sum([0.0 if flag else 1.0])[0] == 0.0

    def gather(self, obj: Any) -> list[Any]:
        if not self.distributed:
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj, group=self.control_group)
        return out


# --------------------------------------------------------------------------------------------
# Device-specific operations: the scripts subclass this
# --------------------------------------------------------------------------------------------

class DeviceOps(abc.ABC):
    """What differs between devices. ``train_ddp.py``, ``train_neuron.py`` and ``train_lm.py`` implement it."""

    name = "cpu"  # cpu | cuda | xla, as printed in the start line
    device: torch.device = torch.device("cpu")
    autocast_device_type = "cpu"  # what torch.autocast calls this device kind

    @abc.abstractmethod
    def setup(self, ctx: DistContext) -> None:
        """Pick the device, start the process group, create ctx's control group."""

    def prepare_model(self, model: torch.nn.Module, args: argparse.Namespace) -> torch.nn.Module:
        """Move to the device; returns the module to train (DDP and XLA wrap it; FSDP shards it itself)."""
        return model.to(self.device)

    def unwrap(self, model: torch.nn.Module) -> torch.nn.Module:
        return getattr(model, "module", model)

    def optimizer_kwargs(self) -> dict[str, Any]:
        return {}

    def optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        optimizer.step()

    def step_end(self) -> None:
        """Called after every optimizer step (XLA cuts and runs its graph here)."""

    @abc.abstractmethod
    def random_stream(self, seed: int) -> Callable[[tuple[int, ...]], torch.Tensor]:
        """A function drawing standard normals on the device, reproducibly from ``seed``."""

    def rng_state(self) -> Any:
        """The device RNG state (None where the device has none of its own)."""
        return None

    def set_rng_state(self, state: Any) -> None:
        pass

    def synchronize(self) -> None:
        """Wait for queued device work, so that wall-clock windows measure finished work."""

    def autocast(self, enabled: bool) -> contextlib.AbstractContextManager:
        return torch.autocast(device_type=self.autocast_device_type, dtype=torch.bfloat16,
                              enabled=enabled)

    def finish(self, ctx: DistContext) -> None:
        """Last words before the process exits (e.g. device statistics)."""

    def shutdown(self, ctx: DistContext) -> None:
        """Every rank calls this at its end (done or stopped), never from an error path. The main rank may still be
        writing (the model, a checkpoint) when the others get here: they wait at a barrier, because a rank that
        closed its connections while a peer held them can be aborted by gloo ("connection closed by peer",
        SIGABRT), which fails the job."""
        if dist.is_available() and dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()


# --------------------------------------------------------------------------------------------
# Seeds and RNG state
# --------------------------------------------------------------------------------------------

def mix_seed(*parts: Any) -> int:
    """A 63-bit seed from parts such as (seed, "data", step, rank): stable across Python runs
    and machines (unlike hash()), and decorrelated between neighbouring steps and ranks."""
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def seed_host_rngs(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (1 << 32))
    torch.manual_seed(seed)


def capture_rng(ops: DeviceOps) -> dict[str, Any]:
    """This rank's RNG states, in types that torch.load(weights_only=True) accepts."""
    np_state = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": (np_state[0], [int(v) for v in np_state[1]], int(np_state[2]),
                  int(np_state[3]), float(np_state[4])),
        "torch": torch.get_rng_state(),
        "device": ops.rng_state(),
    }


def restore_rng(state: dict[str, Any], ops: DeviceOps) -> None:
    python_state = state["python"]
    random.setstate((python_state[0], tuple(python_state[1]), python_state[2]))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if state.get("device") is not None:
        ops.set_rng_state(state["device"])


