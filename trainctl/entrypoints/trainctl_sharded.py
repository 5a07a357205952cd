"""Sharded checkpoints with torch.distributed.checkpoint (DCP), for FSDP training.

Layout of a checkpoint folder (one per node; the folders are node-local, as for whole-state
checkpoints):

    step-0000000040/          a complete checkpoint of step 40
        __0_0.distcp ...      this node's ranks' shards of the model and optimizer (DCP)
        .metadata             DCP's index of every shard (written on every node)
        extra.pt              step, scheduler, every rank's RNG state, the run's settings
        manifest.json         sha256 of every file above: the completion marker, written last
    .step-0000000050.<token>.tmp/   a checkpoint being written (or left by SIGKILL)

A step is complete only when every rank's shards, DCP's metadata and the extras are on disk
(fsynced), the manifest listing their digests has been written inside the temp folder, and
the folder has been renamed to its final name: the rename is the commit. On resume every file
is checked against the manifest, so a damaged shard is found before DCP would read wrong
tensors from it, and the newest checkpoint that every rank can verify wins.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import time
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from trainctl_checkpoint import _fsync_dir, file_sha256, resume_rng
from trainctl_runtime import DeviceOps, DistContext, capture_rng, emit, warn

SHARDED_FORMAT = "trainctl-sharded-checkpoint-v1"
STEP_DIR_RE = re.compile(r"^step-(\d{10})$")
MANIFEST = "manifest.json"
EXTRA = "extra.pt"


class ShardedCheckpointStore:
    """The folders of one node: naming, listing, verification, pruning."""

    def __init__(self, directory: str, keep: int) -> None:
        self.directory, self.keep = directory, keep

    def final_path(self, step: int) -> str:
        return os.path.join(self.directory, f"step-{step:010d}")

    def temp_path(self, step: int, token: str) -> str:
        return os.path.join(self.directory, f".step-{step:010d}.{token}.tmp")

    def steps(self) -> list[int]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return sorted((int(m.group(1)) for m in map(STEP_DIR_RE.match, names) if m),
                      reverse=True)

    def remove_stale_temp_dirs(self) -> None:
        """What a process killed mid-save left: never a candidate, only taking space."""
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(self.directory):
                if name.startswith(".step-") and name.endswith(".tmp"):
                    shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)

    def prune(self) -> None:
        for step in self.steps()[self.keep:]:
            shutil.rmtree(self.final_path(step), ignore_errors=True)

    def set_aside(self, step: int) -> None:
        """Rename a step that failed to verify, so that it stops shadowing older ones."""
        path = self.final_path(step)
        with contextlib.suppress(FileNotFoundError):
            os.replace(path, path + f".corrupt-{int(time.time())}")

    def read_manifest(self, step: int) -> dict[str, Any]:
        path = os.path.join(self.final_path(step), MANIFEST)
        try:
            with open(path) as handle:
                manifest = json.load(handle)
        except FileNotFoundError:
            raise ValueError(f"incomplete: no {MANIFEST}") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"unreadable {MANIFEST}: {exc}") from None
        if manifest.get("format") != SHARDED_FORMAT or manifest.get("step") != step:
            raise ValueError(f"{MANIFEST} is not this step's trainctl manifest")
        return manifest

    def verify_files(self, step: int, names: list[str]) -> None:
        """Raises ValueError naming the first file that is missing or differs from the
        manifest; ``names`` is this rank's share of the files."""
        files = self.read_manifest(step)["files"]
        for name in names:
            path = os.path.join(self.final_path(step), name)
            if not os.path.isfile(path):
                raise ValueError(f"incomplete: {name} missing")
            digest = file_sha256(path)
            if digest != files[name]:
                raise ValueError(f"{name}: sha256 {digest[:16]} differs from the manifest's "
                                 f"{files[name][:16]} (damaged file)")


def _my_share(names: list[str], ctx: DistContext) -> list[str]:
    """The files this rank hashes: the node's ranks split the folder's files between them."""
    return [name for index, name in enumerate(sorted(names))
            if index % ctx.local_world_size == ctx.local_rank]


def _write_fsynced(path: str, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


class ShardedCheckpointer:
    """Saves and resumes an FSDP model, its optimizer and scheduler, and every rank's RNG."""

    def __init__(self, store: ShardedCheckpointStore, ops: DeviceOps, ctx: DistContext,
                 model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
                 identity: dict[str, Any], seed: int) -> None:
        self.store, self.ops, self.ctx = store, ops, ctx
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.identity, self.seed = identity, seed
        # One temp-folder name for all ranks of this run (they write into the same folder).
        self.token = ctx.gather(f"{socket.gethostname()}-{os.getpid()}")[0]
        # Each rank's position in the data (a callable of the step), saved in every checkpoint when set, and the
        # positions of the checkpoint resumed (every rank's, as saved; None: none saved, or synthetic data).
        self.data_state: Any = None
        self.resumed_data: list | None = None

    def _barrier(self) -> None:
        self.ctx.sum([0.0])

    # ---- save ----------------------------------------------------------------------------------
    def save(self, step: int) -> str | None:
        ctx, store = self.ctx, self.store
        temp = store.temp_path(step, self.token)
        if ctx.is_writer:
            shutil.rmtree(temp, ignore_errors=True)
            os.makedirs(temp)
        self._barrier()
        model_state, optim_state = get_state_dict(self.model, self.optimizer)
        metadata = dcp.save({"model": model_state, "optimizer": optim_state},
                            storage_writer=dcp.FileSystemWriter(temp, sync_files=True),
                            process_group=ctx.control_group)
        del metadata
        extra = {"format": SHARDED_FORMAT, "step": step, "world_size": ctx.world_size,
                 "identity": self.identity, "scheduler": self.scheduler.state_dict(),
                 "rng": ctx.gather(capture_rng(self.ops)),
                 "data": ctx.gather(self.data_state(step)) if self.data_state else None}
        metadata_bytes = None
        if ctx.is_main:
            with open(os.path.join(temp, ".metadata"), "rb") as handle:
                metadata_bytes = handle.read()
        # DCP writes its index on the main rank only; every node needs it to load.
        metadata_bytes = ctx.gather(metadata_bytes)[0]
        if ctx.is_writer:
            _write_fsynced(os.path.join(temp, ".metadata"), metadata_bytes)
            torch.save(extra, os.path.join(temp, EXTRA))
        self._barrier()
        names = sorted(name for name in os.listdir(temp) if name != MANIFEST)
        digests = {name: file_sha256(os.path.join(temp, name)) for name in _my_share(names, ctx)}
        node = ctx.rank // ctx.local_world_size
        everyone = ctx.gather((node, digests))
        if ctx.is_writer:
            files = {}
            for their_node, their_digests in everyone:
                if their_node == node:
                    files.update(their_digests)
            manifest = {"format": SHARDED_FORMAT, "step": step, "world_size": ctx.world_size,
                        "files": files}
            _write_fsynced(os.path.join(temp, MANIFEST),
                           json.dumps(manifest, indent=1, sort_keys=True).encode())
            _fsync_dir(temp)
            final = store.final_path(step)
            if os.path.isdir(final):  # the same step saved again after a resume: replace it
                shutil.rmtree(final)
            os.replace(temp, final)  # the commit
            _fsync_dir(store.directory)
            store.prune()
        self._barrier()
        return store.final_path(step) if ctx.is_main else None

    # ---- resume --------------------------------------------------------------------------------
    def _verify(self, step: int) -> str | None:
        """This rank's share of the step's verification: None if fine, else what is wrong."""
        try:
            files = sorted(self.store.read_manifest(step)["files"])
            self.store.verify_files(step, _my_share(files, self.ctx))
            for required in (".metadata", EXTRA):
                if required not in files:
                    raise ValueError(f"incomplete: {required} not in the manifest")
        except ValueError as exc:
            return str(exc)
        return None

    def resume(self) -> int | None:
        ctx, store = self.ctx, self.store
        if ctx.is_writer:
            store.remove_stale_temp_dirs()
        self._barrier()
        all_steps = ctx.gather(store.steps())
        common = set(all_steps[0]).intersection(*all_steps[1:])
        for step in sorted(common, reverse=True):
            error = self._verify(step)
            if not ctx.all_true(error is None):
                if error is not None:
                    warn(f"skipping checkpoint of step {step} in {store.directory}: {error}",
                         ctx.rank)
                self._barrier()  # every rank has verified before the writer renames
                if ctx.is_writer:
                    store.set_aside(step)
                continue
            return self._load(step)
        if ctx.is_main and common:
            warn("no checkpoint could be loaded; starting from step 0")
        return None

    def _load(self, step: int) -> int:
        ctx, path = self.ctx, self.store.final_path(step)
        extra = torch.load(os.path.join(path, EXTRA), map_location="cpu", weights_only=True)
        changed = {key: (extra["identity"].get(key), value) for key, value in self.identity.items()
                   if extra["identity"].get(key) != value}
        if changed and ctx.is_main:
            warn(f"resuming a checkpoint written with other settings (was, now): {changed}")
        model_state, optim_state = get_state_dict(self.model, self.optimizer)
        state = {"model": model_state, "optimizer": optim_state}
        try:
            dcp.load(state, storage_reader=dcp.FileSystemReader(path),
                     process_group=ctx.control_group)
        except Exception as exc:
            # Verified files that do not load are a different model, not damage: refuse rather
            # than start over and overwrite someone's checkpoints.
            raise SystemExit(f"trainctl: checkpoint {path} does not fit this model: "
                             f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                             ) from exc
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optimizer"])
        self.scheduler.load_state_dict(extra["scheduler"])
        self.resumed_data = extra.get("data")
        resume_rng(ctx, self.ops, self.seed, step, extra["rng"], extra["world_size"])
        if ctx.is_main:
            emit(f"resume step={step} path={path}")
        return step
