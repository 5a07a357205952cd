"""Everything the bundled training scripts share that is not device-specific.

This file ships next to ``train_ddp.py`` and ``train_neuron.py`` as a plain module (SageMaker
extracts the folder to /opt/ml/code, EC2 nodes get a copy), so the scripts import it as
``import trainctl_common``: no package, no trainctl install on the instance.

What lives here: argument parsing (SageMaker-style ``--key value`` strings included), the
platform environment (SageMaker ``SM_*`` variables), the process layout and the small control
collectives that make all ranks agree, the Spot-notice signal flag, the model factory, the
synthetic and image-folder data, atomic self-verifying checkpoints, RNG capture, the state
hash, the metric lines and the training loop itself. A script supplies a ``DeviceOps`` (what
differs between CUDA/CPU and XLA) and calls ``run``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import math
import os
import random
import re
import signal
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

CHECKPOINT_FORMAT = "trainctl-checkpoint-v1"
DEFAULT_MODEL = "vit_base_patch16_224"
# Where SageMaker's CheckpointConfig.LocalPath points by default; SageMaker syncs it to S3 and
# restores it before the script starts again after a Spot interruption.
SAGEMAKER_CHECKPOINT_DIR = "/opt/ml/checkpoints"


# --------------------------------------------------------------------------------------------
# Output: one line per event, prefixed "trainctl " so that `trainctl watch` can parse host logs.
# --------------------------------------------------------------------------------------------

def emit(message: str) -> None:
    """A machine-readable line on stdout (flushed: logs are tailed live from CloudWatch)."""
    print(f"trainctl {message}", flush=True)


def warn(message: str, rank: int | None = None) -> None:
    where = "" if rank is None else f" rank={rank}"
    print(f"trainctl warning{where}: {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------------------------

def str2bool(value: str | bool) -> bool:
    """SageMaker passes every hyperparameter as a string ("true", "True", "1")."""
    if isinstance(value, bool):
        return value
    lowered = str(value).strip().lower()
    if lowered in ("1", "true", "yes", "y", "on"):
        return True
    if lowered in ("0", "false", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def optional_path(value: str) -> str | None:
    """'' / 'none' / 'off' switch a path option off (a hyperparameter cannot be unset otherwise)."""
    if value is None or str(value).strip().lower() in ("", "none", "null", "off", "false"):
        return None
    return str(value)


def positive_int(value: str) -> int:
    number = int(str(value).strip())
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def non_negative_int(value: str) -> int:
    number = int(str(value).strip())
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {number}")
    return number


def non_negative_float(value: str) -> float:
    number = float(str(value).strip())
    if not number >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {number}")
    return number


def on_sagemaker(env: dict[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    # The training toolkit sets these in every SageMaker training container.
    return bool(env.get("SM_TRAINING_ENV") or env.get("SM_MODEL_DIR") or env.get("SM_CURRENT_HOST"))


def add_option(parser: argparse.ArgumentParser, flag: str, **kwargs: Any) -> None:
    """Add --some-flag, also spelled --some_flag: SageMaker hyperparameter keys are often written
    with underscores (batch_size), and a launcher or a user should not trip over that."""
    names = [flag]
    if "-" in flag[2:]:
        names.append("--" + flag[2:].replace("-", "_"))
    parser.add_argument(*names, **kwargs)


def build_parser(description: str, devices: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description, allow_abbrev=False)

    def add(flag: str, **kwargs: Any) -> None:
        add_option(parser, flag, **kwargs)

    add("--model", default=DEFAULT_MODEL,
        help=f"timm model name, or vit_micro (32x32, 2 blocks, width 64). Default {DEFAULT_MODEL}")
    add("--num-classes", type=positive_int, default=None,
        help="classes of the head (default: 10 for vit_micro, 1000 otherwise, or the folder count)")
    add("--batch-size", type=positive_int, default=128, help="samples per accelerator per step")
    add("--steps", type=positive_int, default=1000, help="optimizer steps in total")
    add("--lr", type=non_negative_float, default=3e-4, help="Adam peak learning rate")
    add("--warmup-steps", type=non_negative_int, default=None,
        help="linear warm-up steps before the cosine decay (default: steps/10, at most 1000)")
    add("--seed", type=non_negative_int, default=0)
    add("--device", choices=list(devices), default=None,
        help="default: what is there")
    add("--bf16", type=str2bool, default=True,
        help="bf16 autocast (true|false); on a CPU without native bf16 it is emulated and far "
             "slower than false")
    add("--checkpoint-dir", type=optional_path, default=None,
        help=f"default {SAGEMAKER_CHECKPOINT_DIR} on SageMaker, else no checkpoints")
    add("--checkpoint-every", type=non_negative_int, default=0, help="steps; 0 = off")
    add("--checkpoint-seconds", type=non_negative_float, default=600.0,
        help="also checkpoint when this long has passed since the last one; 0 = off")
    add("--keep", type=positive_int, default=3, help="keep the last K checkpoints")
    add("--log-every", type=positive_int, default=10, help="steps between metric lines")
    add("--data-dir", type=optional_path, default=None,
        help="image folder (class per sub-folder); default SM_CHANNEL_TRAIN, else synthetic data")
    add("--data-workers", type=non_negative_int, default=None,
        help="DataLoader workers per rank for --data-dir (default: cpus / local ranks)")
    add("--model-dir", type=optional_path, default=None,
        help="where rank 0 writes the final model (default SM_MODEL_DIR, else none)")
    return parser


def finish_args(args: argparse.Namespace, env: dict[str, str] | None = None) -> argparse.Namespace:
    """Fill the defaults that depend on the platform: SageMaker's folders, or nothing."""
    env = os.environ if env is None else env
    explicit = set(getattr(args, "_explicit", ()))
    if args.checkpoint_dir is None and "checkpoint_dir" not in explicit and on_sagemaker(env):
        args.checkpoint_dir = SAGEMAKER_CHECKPOINT_DIR
    if args.model_dir is None and "model_dir" not in explicit:
        args.model_dir = env.get("SM_MODEL_DIR") or None
    if args.data_dir is None and "data_dir" not in explicit:
        args.data_dir = env.get("SM_CHANNEL_TRAIN") or None
    if args.warmup_steps is None:
        args.warmup_steps = min(1000, args.steps // 10)
    return args


def _unquote(token: str) -> str:
    """SageMaker's HyperParameters are JSON-encoded strings; a launcher that encodes twice (or a
    hand-written job) hands the script '"vit_micro"' with the quotes. Take them off."""
    if len(token) >= 2 and token[0] == token[-1] == '"':
        return token[1:-1]
    return token


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None,
               env: dict[str, str] | None = None) -> argparse.Namespace:
    argv = [_unquote(token) for token in (sys.argv[1:] if argv is None else argv)]
    args = parser.parse_args(argv)
    # Remember which path options were given at all, so that an explicit "--checkpoint-dir none"
    # on SageMaker really switches checkpoints off instead of falling back to the default.
    explicit = set()
    for token in argv:
        if token.startswith("--"):
            explicit.add(token[2:].split("=", 1)[0].replace("-", "_"))
    args._explicit = sorted(explicit)
    return finish_args(args, env)


def platform_summary(env: dict[str, str] | None = None) -> dict[str, str]:
    """What the platform says about this host, for the start-up line (SageMaker only)."""
    env = os.environ if env is None else env
    if not on_sagemaker(env):
        return {"platform": "local-or-ec2", "host": socket.gethostname()}
    return {
        "platform": "sagemaker",
        "host": env.get("SM_CURRENT_HOST", socket.gethostname()),
        "hosts": env.get("SM_HOSTS", "[]").replace(" ", ""),
        "gpus": env.get("SM_NUM_GPUS", "0"),
        "neurons": env.get("SM_NUM_NEURONS", "0"),
    }


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
        """Take over from a script's first-line handler; ``early`` is what it caught."""
        for signum in signums:
            signal.signal(signum, self._handle)
        for signum in early:
            self._handle(signum, None)
        return self


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

class DeviceOps:
    """What differs between devices. ``train_ddp.py`` and ``train_neuron.py`` implement it."""

    name = "cpu"  # cpu | cuda | xla, as printed in the start line
    device: torch.device = torch.device("cpu")
    autocast_device_type = "cpu"  # what torch.autocast calls this device kind

    def setup(self, ctx: DistContext) -> None:
        """Pick the device, start the process group, create ctx's control group."""
        raise NotImplementedError

    def prepare_model(self, model: torch.nn.Module, args: argparse.Namespace) -> torch.nn.Module:
        """Move to the device; returns the module to train (e.g. DDP-wrapped)."""
        raise NotImplementedError

    def unwrap(self, model: torch.nn.Module) -> torch.nn.Module:
        return getattr(model, "module", model)

    def optimizer_kwargs(self) -> dict[str, Any]:
        return {}

    def optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        optimizer.step()

    def step_end(self) -> None:
        """Called after every optimizer step (XLA cuts and runs its graph here)."""

    def random_stream(self, seed: int) -> Callable[[tuple[int, ...]], torch.Tensor]:
        """A function drawing standard normals on the device, reproducibly from ``seed``."""
        raise NotImplementedError

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
        if dist.is_available() and dist.is_initialized():
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


# --------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------

def create_model(name: str, num_classes: int | None) -> torch.nn.Module:
    import timm
    from timm.models.vision_transformer import VisionTransformer

    if name == "vit_micro":
        # Small enough to train on a laptop CPU in seconds: for tests and demos.
        return VisionTransformer(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=4,
                                 num_classes=num_classes or 10)
    return timm.create_model(name, pretrained=False, num_classes=num_classes or 1000)


def default_num_classes(name: str) -> int:
    return 10 if name == "vit_micro" else 1000


def model_image_size(model: torch.nn.Module) -> int:
    patch_embed = getattr(model, "patch_embed", None)
    size = getattr(patch_embed, "img_size", None)
    if size is None:
        cfg = getattr(model, "pretrained_cfg", None) or {}
        size = cfg.get("input_size", (3, 224, 224))[1:]
    if isinstance(size, (tuple, list)):
        if size[0] != size[1]:
            raise ValueError(f"square images expected, the model wants {tuple(size)}")
        size = size[0]
    return int(size)


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------

class SyntheticTask:
    """Batches generated on the device, so data loading can never be the bottleneck.

    Each batch comes from a random stream seeded by (seed, step, rank): any step of any rank can
    be regenerated exactly, which is what makes a resumed run identical to an uninterrupted one.

    The task is learnable: every image is noise plus a coarse 8x8 prototype pattern of a random
    class, and its label is a deterministic function of the image alone: the prototype with the
    largest inner product with the image's 8x8 average-pooled version. (With the signal
    strength used, that is the class whose pattern was added, so a model can learn it.)
    """

    GRID = 8
    SIGNAL = 1.0

    def __init__(self, seed: int, num_classes: int, image_size: int, ops: DeviceOps) -> None:
        self.seed = seed
        self.num_classes = num_classes
        self.image_size = image_size
        self.ops = ops
        generator = torch.Generator().manual_seed(mix_seed(seed, "prototypes"))
        # Made on the CPU with a CPU generator so the task is the same on every device kind.
        prototypes = torch.randn(num_classes, 3, self.GRID, self.GRID, generator=generator)
        self.prototypes = prototypes.to(ops.device)
        self.flat_prototypes = self.prototypes.reshape(num_classes, -1)

    def labels_for(self, images: torch.Tensor) -> torch.Tensor:
        pooled = F.adaptive_avg_pool2d(images.float(), self.GRID).reshape(images.shape[0], -1)
        return (pooled @ self.flat_prototypes.t()).argmax(dim=1)

    def batch(self, step: int, rank: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        draw = self.ops.random_stream(mix_seed(self.seed, "data", step, rank))
        classes = draw((batch_size, self.num_classes)).argmax(dim=1)
        pattern = F.interpolate(self.prototypes[classes], size=(self.image_size, self.image_size),
                                mode="nearest")
        images = draw((batch_size, 3, self.image_size, self.image_size)) + self.SIGNAL * pattern
        return images, self.labels_for(images)


class ShardedEpochSampler(torch.utils.data.Sampler):
    """This rank's indices of one epoch, starting at a given batch, for exact mid-epoch resume.

    The epoch's permutation depends only on (seed, epoch), so every rank and every restart sees
    the same order; ranks take interleaved slices of whole batches.
    """

    def __init__(self, size: int, seed: int, epoch: int, rank: int, world_size: int,
                 batch_size: int, start_batch: int) -> None:
        self.size, self.seed, self.epoch = size, seed, epoch
        self.rank, self.world_size = rank, world_size
        self.batch_size, self.start_batch = batch_size, start_batch

    def batches_per_epoch(self) -> int:
        return self.size // (self.batch_size * self.world_size)

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(mix_seed(self.seed, "epoch", self.epoch))
        order = torch.randperm(self.size, generator=generator)
        per_rank = self.batches_per_epoch() * self.batch_size
        mine = order[self.rank::self.world_size][:per_rank]
        return iter(mine[self.start_batch * self.batch_size:].tolist())

    def __len__(self) -> int:
        return (self.batches_per_epoch() - self.start_batch) * self.batch_size


class ImageFolderData:
    """The real-data path: an ImageFolder (one sub-folder per class), e.g. SM_CHANNEL_TRAIN.

    Transforms are deterministic (resize, centre crop, normalise) so that a resumed run sees
    exactly the batches the interrupted one would have seen.
    """

    def __init__(self, root: str, image_size: int, seed: int, ctx: DistContext,
                 batch_size: int, workers: int | None, pin_memory: bool) -> None:
        from torchvision import datasets, transforms

        transform = transforms.Compose([
            transforms.Resize(image_size),
            transforms.CenterCrop(image_size),
            transforms.ToTensor(),
            transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
        ])
        self.dataset = datasets.ImageFolder(root, transform=transform)
        self.num_classes = len(self.dataset.classes)
        self.seed, self.ctx, self.batch_size = seed, ctx, batch_size
        cpus = os.cpu_count() or 1
        self.workers = workers if workers is not None else max(0, cpus // ctx.local_world_size)
        self.pin_memory = pin_memory
        self.batches_per_epoch = len(self.dataset) // (batch_size * ctx.world_size)
        if self.batches_per_epoch < 1:
            raise SystemExit(
                f"trainctl: {root} has {len(self.dataset)} images, fewer than one global batch "
                f"({batch_size} x {ctx.world_size} ranks); lower --batch-size")

    def batches(self, start_step: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        epoch, start_batch = divmod(start_step, self.batches_per_epoch)
        while True:
            sampler = ShardedEpochSampler(len(self.dataset), self.seed, epoch, self.ctx.rank,
                                          self.ctx.world_size, self.batch_size, start_batch)
            loader = torch.utils.data.DataLoader(
                self.dataset, batch_size=self.batch_size, sampler=sampler, drop_last=True,
                num_workers=self.workers, pin_memory=self.pin_memory,
                persistent_workers=False)
            yield from loader
            epoch, start_batch = epoch + 1, 0


# --------------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------------

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
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.remove(temp)
            raise
        self._prune()
        return final

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


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------

def warmup_cosine(warmup_steps: int, total_steps: int) -> Callable[[int], float]:
    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return factor


# Recorded in every checkpoint; a resume with different values of these is a different run.
RUN_IDENTITY = ("model", "num_classes", "batch_size", "steps", "lr", "warmup_steps", "seed",
                "bf16", "data_dir")


@dataclass
class Trainer:
    args: argparse.Namespace
    ops: DeviceOps
    ctx: DistContext
    stop: StopSignal
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    store: CheckpointStore | None
    step: int = 0
    last_saved_step: int = -1

    # ---- checkpoints -----------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        return {key: getattr(self.args, key, None) for key in RUN_IDENTITY}

    def save(self) -> None:
        """Collective: every rank contributes its RNG state; one rank per node writes."""
        if self.store is None or self.step == self.last_saved_step:
            return
        started = time.perf_counter()
        rng_states = self.ctx.gather(capture_rng(self.ops))
        path = None
        if self.ctx.is_writer:
            payload = {
                "format": CHECKPOINT_FORMAT,
                "step": self.step,
                "world_size": self.ctx.world_size,
                "identity": self.identity(),
                "model": tree_to_cpu(self.ops.unwrap(self.model).state_dict()),
                "optimizer": tree_to_cpu(self.optimizer.state_dict()),
                "scheduler": self.scheduler.state_dict(),
                "rng": rng_states,
            }
            path = self.store.save(self.step, payload)
        self.last_saved_step = self.step
        if self.ctx.is_main:
            emit(f"checkpoint step={self.step} seconds={time.perf_counter() - started:.3f} "
                 f"path={path}")

    def resume(self) -> None:
        """Resume from the newest checkpoint that every rank can load; skip broken ones."""
        if self.store is None:
            return
        if self.ctx.is_writer:
            self.store.remove_stale_temp_files()
        # Only steps that every node has are candidates (node-local folders may differ by the
        # checkpoint that was being written when the machines were reclaimed).
        all_steps = self.ctx.gather(self.store.steps())
        common = set(all_steps[0]).intersection(*all_steps[1:])
        for step in sorted(common, reverse=True):
            try:
                payload, path = self.store.load(step)
                error = None
            except ValueError as exc:
                payload, path, error = None, None, str(exc)
            if not self.ctx.all_true(error is None):
                if error is not None:
                    warn(f"skipping checkpoint of step {step} in {self.store.directory}: {error}",
                         self.ctx.rank)
                    if self.ctx.is_writer:
                        self.store.set_aside(step)
                continue
            self._apply(payload, path)
            return
        if self.ctx.is_main and common:
            warn("no checkpoint could be loaded; starting from step 0")

    def _apply(self, payload: dict[str, Any], path: str) -> None:
        identity = payload.get("identity", {})
        changed = {key: (identity.get(key), value) for key, value in self.identity().items()
                   if key in identity and identity.get(key) != value}
        if changed and self.ctx.is_main:
            warn(f"resuming a checkpoint written with other settings (was, now): {changed}")
        try:
            self.ops.unwrap(self.model).load_state_dict(payload["model"])
        except RuntimeError as exc:
            # Not "broken": a different model. Refuse rather than silently start over and
            # overwrite someone's checkpoints.
            raise SystemExit(f"trainctl: checkpoint {path} does not fit --model "
                             f"{self.args.model}: {exc}") from exc
        self.optimizer.load_state_dict(payload["optimizer"])
        self.scheduler.load_state_dict(payload["scheduler"])
        self.step = self.last_saved_step = int(payload["step"])
        rng = payload["rng"]
        if payload.get("world_size") == self.ctx.world_size and len(rng) == self.ctx.world_size:
            restore_rng(rng[self.ctx.rank], self.ops)
        else:
            # A different number of ranks: the old per-rank streams do not map onto the new
            # ranks, so start fresh, still reproducible, streams for this step.
            seed_host_rngs(mix_seed(self.args.seed, "host", self.step, self.ctx.rank))
            if self.ctx.is_main:
                warn(f"checkpoint was written by {payload.get('world_size')} ranks, now "
                     f"{self.ctx.world_size}: RNG streams reseeded")
        if self.ctx.is_main:
            emit(f"resume step={self.step} path={path}")

    # ---- the loop ---------------------------------------------------------------------------
    def train(self, batches: Callable[[int], Iterator[tuple[torch.Tensor, torch.Tensor]]]) -> str:
        """Train to --steps; returns "done" or the name of the signal that stopped it."""
        args, ctx, ops = self.args, self.ctx, self.ops
        global_batch = args.batch_size * ctx.world_size
        # Per-step losses stay on the device until a log step: reading one every step would
        # make the host wait for the device. (A list rather than a running sum keeps XLA's step
        # graph the same on every step, so it compiles once.)
        window_losses: list[torch.Tensor] = []
        ops.synchronize()
        window_start = time.perf_counter()
        last_checkpoint_time = time.monotonic()
        stream = batches(self.step)
        self.model.train()
        while self.step < args.steps:
            images, labels = next(stream)
            images = images.to(ops.device, non_blocking=True)
            labels = labels.to(ops.device, non_blocking=True)
            with ops.autocast(args.bf16):
                logits = self.model(images)
            loss = F.cross_entropy(logits.float(), labels)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            ops.optimizer_step(self.optimizer)
            self.scheduler.step()
            ops.step_end()
            self.step += 1
            window_losses.append(loss.detach())

            # The step boundary. One control all-reduce per step carries: SIGTERM seen by any
            # rank, time-based checkpoint due on any rank, and (on log steps) the loss sum.
            log_now = self.step % args.log_every == 0 or self.step == args.steps
            window_steps = len(window_losses)
            local_loss = float(torch.stack(window_losses).mean().item()) if log_now else 0.0
            checkpoint_due_by_time = (args.checkpoint_seconds > 0 and self.store is not None
                                      and time.monotonic() - last_checkpoint_time
                                      >= args.checkpoint_seconds)
            stop_votes, time_votes, loss_total = ctx.sum(
                [1.0 if self.stop.requested else 0.0, 1.0 if checkpoint_due_by_time else 0.0,
                 local_loss])
            if log_now:
                ops.synchronize()
                elapsed = time.perf_counter() - window_start
                if ctx.is_main:
                    emit(f"step={self.step} loss={loss_total / ctx.world_size:.6f} "
                         f"samples_per_s={global_batch * window_steps / elapsed:.2f}")
                window_losses = []
            stopping = stop_votes > 0
            due = (stopping or time_votes > 0
                   or (args.checkpoint_every and self.step % args.checkpoint_every == 0))
            if self.step >= args.steps:
                break  # finished: the final checkpoint is written by the caller, stop or not
            if due:
                save_started = time.perf_counter()
                self.save()
                last_checkpoint_time = time.monotonic()
                # Keep checkpoint time out of samples/s: that is the training throughput the
                # planner learns from; checkpoint seconds have their own line.
                window_start += time.perf_counter() - save_started
            if log_now:
                window_start = time.perf_counter()
            if stopping:
                # Every rank reaches this at the same step: the votes were summed over all.
                return self.stop.signal_name or "SIGTERM-on-another-rank"
        return "done"


def run(args: argparse.Namespace, ops: DeviceOps, stop: StopSignal) -> int:
    """The whole job: set up, resume, train, checkpoint, write the model, print the hash."""
    ctx = DistContext.from_env()
    ops.setup(ctx)
    if ctx.is_main:
        summary = " ".join(f"{k}={v}" for k, v in platform_summary().items())
        emit(f"start device={ops.name} world_size={ctx.world_size} model={args.model} "
             f"batch_size={args.batch_size} steps={args.steps} {summary}")
        if args.checkpoint_dir is None:
            warn("no --checkpoint-dir: this run cannot be resumed after an interruption")

    num_classes = args.num_classes
    if args.data_dir:
        # The folder decides the classes unless told otherwise.
        from torchvision import datasets
        folder_classes = len(datasets.folder.find_classes(args.data_dir)[0])
        num_classes = num_classes or folder_classes
    num_classes = num_classes or default_num_classes(args.model)
    args.num_classes = num_classes

    # Same initial weights on every rank and in every run: seeded before the model is built.
    seed_host_rngs(mix_seed(args.seed, "init"))
    model = create_model(args.model, num_classes)
    image_size = model_image_size(model)
    # Then per-rank host RNG streams (anything random on the host differs between ranks).
    seed_host_rngs(mix_seed(args.seed, "host", 0, ctx.rank))

    model = ops.prepare_model(model, args)
    optimizer = torch.optim.Adam(ops.unwrap(model).parameters(), lr=args.lr,
                                 **ops.optimizer_kwargs())
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_cosine(args.warmup_steps, args.steps))
    store = CheckpointStore(args.checkpoint_dir, args.keep) if args.checkpoint_dir else None
    trainer = Trainer(args=args, ops=ops, ctx=ctx, stop=stop, model=model, optimizer=optimizer,
                      scheduler=scheduler, store=store)
    trainer.resume()

    if args.data_dir:
        data = ImageFolderData(args.data_dir, image_size=image_size, seed=args.seed, ctx=ctx,
                               batch_size=args.batch_size, workers=args.data_workers,
                               pin_memory=ops.name == "cuda")
        batches = data.batches
    else:
        task = SyntheticTask(args.seed, num_classes, image_size, ops)

        def batches(start: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
            step = start
            while True:
                yield task.batch(step, ctx.rank, args.batch_size)
                step += 1

    outcome = trainer.train(batches)
    # Always leave a checkpoint of where we are: after a stop it is what the platform resumes
    # from; after the last step it makes a rerun of a finished job a no-op.
    trainer.save()
    if outcome != "done":
        emit(f"stopped rank={ctx.rank} step={trainer.step} signal={outcome} exit=0")
        ops.finish(ctx)
        ops.shutdown(ctx)
        return 0

    model_state = tree_to_cpu(ops.unwrap(model).state_dict())
    digest = state_sha256(model_state, tree_to_cpu(optimizer.state_dict()))
    if ctx.is_main:
        if args.model_dir:
            write_model(args.model_dir, model_state, args)
        emit(f"final_state_sha256={digest}")
    ops.finish(ctx)
    ops.shutdown(ctx)
    return 0


def write_model(model_dir: str, state: dict[str, Any], args: argparse.Namespace) -> None:
    """The trained weights where SageMaker uploads them from (/opt/ml/model), atomically."""
    os.makedirs(model_dir, exist_ok=True)
    final = os.path.join(model_dir, "model.pt")
    temp = final + f".{os.getpid()}.tmp"
    with open(temp, "wb") as handle:
        torch.save({"model": args.model, "num_classes": args.num_classes, "state_dict": state},
                   handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, final)
    emit(f"model path={final}")
