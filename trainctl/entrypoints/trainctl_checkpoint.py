"""Whole-state checkpoints (one self-verifying file per step and node), the state hash, and the
checkpointer the replicated-model scripts (train_ddp.py, train_neuron.py) use.

Plain module beside the scripts (``import trainctl_checkpoint``). Sharded checkpoints of the
FSDP script are trainctl_sharded.py's.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import socket
import time
from typing import Any, Callable

import torch
from trainctl_runtime import (DeviceOps, DistContext, capture_rng, emit, mix_seed, restore_rng,
                              seed_host_rngs, warn)

CHECKPOINT_FORMAT = "trainctl-checkpoint-v1"


# ckpt-<step, 10 digits>-<first 16 hex of the file's sha256>.pt. The digest in the name makes
# every checkpoint self-verifying: torch.load happily returns tensors from a file whose bytes
# were damaged in the middle, a hash over the bytes does not. Temp files start with a dot and
# end in .tmp, so a file half-written when SIGKILL came never matches this pattern.
CHECKPOINT_RE = re.compile(r"^ckpt-(\d{10})-([0-9a-f]{16})\.pt$")


def checkpoint_name(step: int, digest: str) -> str:
    return f"ckpt-{step:010d}-{digest[:16]}.pt"


class _HashingWriter:
    """A file wrapper that hashes what torch.save writes, so the digest costs no second read."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.hash = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.hash.update(data)
        return self.raw.write(data)

    def flush(self) -> None:
        self.raw.flush()


class CheckpointDiskFull(RuntimeError):
    """The checkpoint's disk is full: the device, and the newest checkpoint that is whole."""


def _disk_full(error: BaseException | None) -> bool:
    """ENOSPC anywhere in the error's chain, or torch's wrapping of it (its writer reports "file write failed")."""
    while error is not None:
        if isinstance(error, OSError) and error.errno == errno.ENOSPC:
            return True
        if "file write failed" in str(error) or "No space left" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def _mount_point(path: str) -> str:
    path = os.path.realpath(path)
    device = os.stat(path).st_dev
    while path != os.path.dirname(path) and os.stat(os.path.dirname(path)).st_dev == device:
        path = os.path.dirname(path)
    return path


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(8 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class CheckpointStore:
    def __init__(self, directory: str, keep: int) -> None:
        self.directory = directory
        self.keep = keep

    def entries(self) -> list[tuple[int, str]]:
        """(step, path) of every well-named checkpoint, newest first."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            match = CHECKPOINT_RE.match(name)
            if match:
                found.append((int(match.group(1)), os.path.join(self.directory, name)))
        # Among equal steps (a step saved again after a resume) prefer the newest file.
        found.sort(key=lambda item: (item[0], _mtime(item[1])), reverse=True)
        return found

    def steps(self) -> list[int]:
        return sorted({step for step, _ in self.entries()}, reverse=True)

    def remove_stale_temp_files(self) -> None:
        """Temp files left by a process killed mid-write: never loadable, only taking space."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return
        for name in names:
            if name.startswith(".ckpt-") and name.endswith(".tmp"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(self.directory, name))

    def save(self, step: int, payload: dict[str, Any]) -> str:
        """Write atomically: temp file, fsync, rename, fsync the folder; then prune to K."""
        os.makedirs(self.directory, exist_ok=True)
        temp = os.path.join(self.directory,
                            f".ckpt-{step:010d}.{socket.gethostname()}-{os.getpid()}.tmp")
        try:
            with open(temp, "wb") as raw:
                writer = _HashingWriter(raw)
                torch.save(payload, writer)
                raw.flush()
                os.fsync(raw.fileno())
            final = os.path.join(self.directory, checkpoint_name(step, writer.hash.hexdigest()))
            os.replace(temp, final)
            _fsync_dir(self.directory)
        except BaseException as e:
            with contextlib.suppress(FileNotFoundError):
                os.remove(temp)
            if _disk_full(e):  # torch says "inline_container.cc ... file write failed": say what and what is safe
                raise CheckpointDiskFull(self._full_message()) from e
            raise
        self._prune()
        return final

    def _full_message(self) -> str:
        steps = self.steps()
        last = f"the last good checkpoint is step {max(steps)}" if steps else "no checkpoint was saved yet"
        return f"no space left on {_mount_point(self.directory)} (checkpoints in {self.directory}); {last}"

    def _prune(self) -> None:
        """Delete all but the newest K steps. Several files of one step (saved again after a
        resume, or by each node into a shared folder) all stay until their step ages out:
        deleting "the other" file of a step could make two writers delete each other's."""
        kept_steps = set(self.steps()[:self.keep])
        for entry_step, path in self.entries():
            if entry_step not in kept_steps:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)

    def load(self, step: int) -> tuple[dict[str, Any], str]:
        """The newest intact file for ``step``; raises ValueError naming what was wrong."""
        problems = []
        for entry_step, path in self.entries():
            if entry_step != step:
                continue
            try:
                return load_checkpoint_file(path), path
            except Exception as exc:  # any way a file can be broken: report it and go on
                problems.append(f"{os.path.basename(path)}: {exc}")
        raise ValueError("; ".join(problems) or f"no checkpoint for step {step}")

    def set_aside(self, step: int) -> None:
        """Rename files of a step that failed to load, so they stop shadowing older ones."""
        for entry_step, path in self.entries():
            if entry_step == step:
                with contextlib.suppress(FileNotFoundError):
                    os.replace(path, path + f".corrupt-{int(time.time())}")


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except FileNotFoundError:
        return 0.0


def resume_rng(ctx: DistContext, ops: DeviceOps, seed: int, step: int, rng: list, world_size: int | None) -> None:
    """Each rank's RNG streams as the checkpoint saved them; with a different number of ranks the old per-rank
    streams do not map onto the new ranks, so start fresh, still reproducible, streams for this step."""
    if world_size == ctx.world_size and len(rng) == ctx.world_size:
        restore_rng(rng[ctx.rank], ops)
        return
    seed_host_rngs(mix_seed(seed, "host", step, ctx.rank))
    if ctx.is_main:
        warn(f"checkpoint was written by {world_size} ranks, now {ctx.world_size}: RNG streams reseeded")


def load_checkpoint_file(path: str) -> dict[str, Any]:
    match = CHECKPOINT_RE.match(os.path.basename(path))
    if not match:
        raise ValueError("not a trainctl checkpoint name")
    digest = file_sha256(path)
    if not digest.startswith(match.group(2)):
        raise ValueError(f"sha256 {digest[:16]} does not match the name (damaged file)")
    payload = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError("not a trainctl checkpoint payload")
    if payload.get("step") != int(match.group(1)):
        raise ValueError("step inside does not match the name")
    for key in ("model", "optimizer", "scheduler", "rng"):
        if key not in payload:
            raise ValueError(f"missing {key!r}")
    return payload


def tree_to_cpu(obj: Any) -> Any:
    """Device tensors to CPU copies (XLA tensors must be fetched before torch.save or hashing)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {key: tree_to_cpu(value) for key, value in obj.items()}
    if isinstance(obj, list):
        return [tree_to_cpu(value) for value in obj]
    if isinstance(obj, tuple):
        return tuple(tree_to_cpu(value) for value in obj)
    return obj


# --------------------------------------------------------------------------------------------
# State hash
# --------------------------------------------------------------------------------------------

def state_sha256(*trees: Any) -> str:
    """sha256 over tensors (dtype, shape, bytes) and plain values, walked in a fixed order, so
    equal training states give equal digests whatever the device or the dict order."""
    digest = hashlib.sha256()

    def feed(obj: Any) -> None:
        if isinstance(obj, torch.Tensor):
            tensor = obj.detach().cpu().contiguous()
            digest.update(f"T{tensor.dtype}{tuple(tensor.shape)}|".encode())
            digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(obj, dict):
            digest.update(b"{")
            for key in sorted(obj, key=repr):
                digest.update(repr(key).encode() + b":")
                feed(obj[key])
            digest.update(b"}")
        elif isinstance(obj, (list, tuple)):
            digest.update(b"[")
            for value in obj:
                feed(value)
                digest.update(b",")
            digest.update(b"]")
        else:
            digest.update(repr(obj).encode())

    for tree in trees:
        feed(tree)
    return digest.hexdigest()




class FullStateCheckpointer:
    """Model, optimizer, scheduler and every rank's RNG in one file per node, written by one
    rank per node (the model is replicated, so any rank's copy is the whole state)."""

    def __init__(self, store: CheckpointStore, ops: DeviceOps, ctx: DistContext,
                 model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
                 identity: dict[str, Any], seed: int) -> None:
        self.store, self.ops, self.ctx = store, ops, ctx
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.identity, self.seed = identity, seed
        # Each rank's position in the job's data (epoch, batch, samples read), when it reads real data.
        self.data_state: Callable[[int], dict] | None = None
        self._resumed_data: list | None = None

    def resumed_data(self, rank: int) -> dict | None:
        """This rank's data position from the checkpoint resumed (None: none, or synthetic data)."""
        saved = self._resumed_data
        return saved[rank] if saved and rank < len(saved) else None

    def save(self, step: int) -> str | None:
        """Collective: every rank contributes its RNG state and data position; one rank per node writes."""
        rng_states = self.ctx.gather(capture_rng(self.ops))
        positions = self.ctx.gather(self.data_state(step)) if self.data_state else None
        if not self.ctx.is_writer:
            return None
        payload = {
            "format": CHECKPOINT_FORMAT,
            "step": step,
            "world_size": self.ctx.world_size,
            "identity": self.identity,
            "model": tree_to_cpu(self.ops.unwrap(self.model).state_dict()),
            "optimizer": tree_to_cpu(self.optimizer.state_dict()),
            "scheduler": self.scheduler.state_dict(),
            "rng": rng_states,
            "data": positions,
        }
        return self.store.save(step, payload)

    def resume(self) -> int | None:
        """Resume from the newest checkpoint that every rank can load; skip broken ones."""
        ctx, store = self.ctx, self.store
        if ctx.is_writer:
            store.remove_stale_temp_files()
        # Only steps that every node has are candidates (node-local folders may differ by the
        # checkpoint that was being written when the machines were reclaimed).
        all_steps = ctx.gather(store.steps())
        common = set(all_steps[0]).intersection(*all_steps[1:])
        for step in sorted(common, reverse=True):
            try:
                payload, path = store.load(step)
                error = None
            except ValueError as exc:
                payload, path, error = None, None, str(exc)
            if not ctx.all_true(error is None):
                if error is not None:
                    warn(f"skipping checkpoint of step {step} in {store.directory}: {error}",
                         ctx.rank)
                    if ctx.is_writer:
                        store.set_aside(step)
                continue
            return self._apply(payload, path)
        if ctx.is_main and common:
            warn("no checkpoint could be loaded; starting from step 0")
        return None

    def _apply(self, payload: dict[str, Any], path: str) -> int:
        ctx = self.ctx
        identity = payload.get("identity", {})
        changed = {key: (identity.get(key), value) for key, value in self.identity.items()
                   if key in identity and identity.get(key) != value}
        if changed and ctx.is_main:
            warn(f"resuming a checkpoint written with other settings (was, now): {changed}")
        try:
            self.ops.unwrap(self.model).load_state_dict(payload["model"])
        except RuntimeError as exc:
            # Not "broken": a different model. Refuse rather than silently start over and
            # overwrite someone's checkpoints.
            raise SystemExit(f"trainctl: checkpoint {path} does not fit --model "
                             f"{self.identity.get('model')}: {exc}") from exc
        self.optimizer.load_state_dict(payload["optimizer"])
        self.scheduler.load_state_dict(payload["scheduler"])
        step = int(payload["step"])
        # Positions are per rank: valid only for the same number of ranks (else each rank starts from the step's)
        data = payload.get("data")
        self._resumed_data = data if data and payload.get("world_size") == ctx.world_size else None
        resume_rng(ctx, self.ops, self.seed, step, payload["rng"], payload.get("world_size"))
        if ctx.is_main:
            emit(f"resume step={step} path={path}")
        return step
