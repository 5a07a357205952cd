"""The ViT side of the bundled scripts: the timm model factory and its data (synthetic images
generated on the device, or an image folder with exact mid-epoch resume).

Plain module beside the scripts (``import trainctl_vision``).
"""

from __future__ import annotations

import os
from typing import Iterator

import torch
import torch.nn.functional as F
from trainctl_runtime import DeviceOps, DistContext, mix_seed, warn

DEFAULT_MODEL = "vit_base_patch16_224"


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
    """This rank's indices of one epoch, starting at a given step, for exact mid-epoch resume.

    The epoch's permutation depends only on (seed, epoch), so every rank and every restart sees
    the same order. Step j of the epoch takes the permutation's samples j x G .. (j + 1) x G - 1
    (G: the step's global batch of `chunks` micro-batches, trainctl_elastic.py), and chunk c of
    the step its c-th run of `batch_size`; a rank takes its own chunks (`mine`) of every step. By
    default one chunk per rank (chunk = rank), the fixed-size layout.
    """

    def __init__(self, size: int, seed: int, epoch: int, rank: int, world_size: int,
                 batch_size: int, start_batch: int, batches: int | None = None,
                 chunks: int | None = None, mine: list[int] | None = None) -> None:
        self.size, self.seed, self.epoch = size, seed, epoch
        self.rank, self.world_size = rank, world_size
        self.batch_size, self.start_batch = batch_size, start_batch
        self.chunks = world_size if chunks is None else chunks
        self.mine = [rank] if mine is None else list(mine)
        # An epoch's steps when the caller decides (a sharded channel: the smallest host's count, so that every
        # host runs the same steps per epoch); at most what `size` allows.
        self.batches = batches

    def batches_per_epoch(self) -> int:
        own = self.size // (self.batch_size * self.chunks)
        return own if self.batches is None else min(own, self.batches)

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(mix_seed(self.seed, "epoch", self.epoch))
        order = torch.randperm(self.size, generator=generator).tolist()
        step_samples, b = self.batch_size * self.chunks, self.batch_size
        for step in range(self.start_batch, self.batches_per_epoch()):
            for chunk in self.mine:
                first = step * step_samples + chunk * b
                yield from order[first:first + b]

    def __len__(self) -> int:
        return (self.batches_per_epoch() - self.start_batch) * self.batch_size * len(self.mine)


class HostShare:
    """A sharded `train` channel (SageMaker's ShardedByS3Key, or the EC2 agent's `sharded`): each host holds only
    its share of the files. The host's ranks split the host's files among themselves (LOCAL_RANK of
    LOCAL_WORLD_SIZE), labels are the job's (the union of every host's class folders), and an epoch is the smallest
    host's number of batches, so that every host runs the same steps per epoch. The position in the data is then
    per host: a resume is exact when each host holds the same files as before (the same host index)."""

    def __init__(self, ctx: DistContext, classes: list[str] | None) -> None:
        self.host = ctx.rank // ctx.local_world_size
        self.classes = classes

    def batches_per_epoch(self, ctx: DistContext, samples: int, batch_size: int) -> int:
        """Collective: the fewest batches any host's ranks can each take from its share in one epoch."""
        per_host = ctx.gather((self.host, samples))
        fewest = min(count // (batch_size * ctx.local_world_size) for _, count in per_host)
        if fewest < 1:
            host, count = min(per_host, key=lambda item: item[1])
            raise SystemExit(f"trainctl: host {host}'s shard of the sharded `train` channel has {count} images, "
                             f"fewer than one batch for each of its {ctx.local_world_size} ranks ({batch_size} "
                             f"each); lower --batch-size, or use mode copy")
        return fewest


class ImageFolderData:
    """The real-data path: an image folder (one sub-folder per class) or WebDataset-style .tar shards, e.g. the
    `train` channel (SM_CHANNEL_TRAIN).

    Transforms are deterministic (resize, centre crop, normalise), and each epoch's order is a permutation seeded by
    (seed, epoch), dealt to the ranks in whole batches: a position (epoch, batch within it) fixes every rank's next
    samples. The position is saved in each checkpoint and a resumed run continues from it, so it sees exactly the
    samples the uninterrupted run would have. On a sharded channel (`share`) the permutation is of this host's files,
    dealt to this host's ranks only (HostShare).
    """

    def __init__(self, root: str, image_size: int, seed: int, ctx: DistContext,
                 batch_size: int, workers: int | None, pin_memory: bool,
                 share: HostShare | None = None, plan=None) -> None:
        from torchvision import transforms
        from trainctl_data import open_images

        transform = transforms.Compose([
            transforms.Resize(image_size),
            transforms.CenterCrop(image_size),
            transforms.ToTensor(),
            transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
        ])
        self.root, self.share = root, share
        self.dataset, self.num_classes, self.kind = open_images(root, transform,
                                                                share.classes if share else None)
        self.seed, self.ctx, self.batch_size = seed, ctx, batch_size
        cpus = os.cpu_count() or 1
        self.workers = workers if workers is not None else max(0, cpus // ctx.local_world_size)
        self.pin_memory = pin_memory
        if share:   # the host's files, dealt to its ranks: one chunk each (no elastic promise here)
            self.kind += f", host {share.host}'s shard"
            self.slot, self.chunks, self.mine = ctx.local_rank, ctx.local_world_size, [ctx.local_rank]
            self.batches_per_epoch = share.batches_per_epoch(ctx, len(self.dataset), batch_size)
        else:       # the job's global batch in chunks, whatever the number of ranks (trainctl_elastic.py)
            self.slot = ctx.rank
            self.chunks = plan.chunks if plan else ctx.world_size
            self.mine = plan.mine if plan else [ctx.rank]
            self.batches_per_epoch = len(self.dataset) // (batch_size * self.chunks)
        if self.batches_per_epoch < 1:
            raise SystemExit(
                f"trainctl: {root} has {len(self.dataset)} images, fewer than one global batch "
                f"({batch_size} x {self.chunks} micro-batches); lower --batch-size")
        self.start_step, self.start_batches, self.read_before = 0, 0, 0

    def start(self, step: int, saved: dict | None) -> None:
        """Where this run starts: the checkpoint's position when it has one, else the step's."""
        self.start_step = step
        self.start_batches = step
        self.read_before = step * self.batch_size * len(self.mine)
        if saved:
            self.start_batches = saved["epoch"] * self.batches_per_epoch + saved["batch"]
            self.read_before = saved["read"]
            if saved.get("samples") != len(self.dataset):
                where = f"host {self.share.host}'s shard of " if self.share else ""
                warn(f"{where}the data at {self.root} holds {len(self.dataset)} samples, the checkpoint's "
                     f"{saved.get('samples')}: the resumed run does not see the samples the first one would have")

    def position(self, step: int) -> dict:
        """This rank's position after `step` optimizer steps (each takes one batch)."""
        epoch, batch = divmod(self.start_batches + step - self.start_step, self.batches_per_epoch)
        read = self.read_before + (step - self.start_step) * self.batch_size * len(self.mine)
        return {"epoch": epoch, "batch": batch, "read": read, "samples": len(self.dataset),
                "world_size": self.ctx.world_size, "host": self.share.host if self.share else None}

    def batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        epoch, start_batch = divmod(self.start_batches, self.batches_per_epoch)
        while True:
            sampler = ShardedEpochSampler(len(self.dataset), self.seed, epoch, self.slot, self.chunks,
                                          self.batch_size, start_batch, batches=self.batches_per_epoch,
                                          chunks=self.chunks, mine=self.mine)
            loader = torch.utils.data.DataLoader(
                self.dataset, batch_size=self.batch_size, sampler=sampler, drop_last=True,
                num_workers=self.workers, pin_memory=self.pin_memory,
                persistent_workers=False)
            yield from loader
            epoch, start_batch = epoch + 1, 0


def add_vision_options(parser) -> None:
    """The ViT scripts' own flags, on top of trainctl_args.build_parser's."""
    from trainctl_architectures import model_names
    from trainctl_args import add_option, non_negative_int, positive_int

    # The models listed in architectures.txt, the list trainctl plans with: a spec the job cannot build is
    # refused at `trainctl plan`, and a hand-written run here gets argparse's one line with the choices.
    add_option(parser, "--model", default=DEFAULT_MODEL, choices=model_names("ddp"),
               help=f"a timm ViT of architectures.txt, or vit_micro (32x32, 2 blocks, width 64). "
                    f"Default {DEFAULT_MODEL}")
    add_option(parser, "--num-classes", type=positive_int, default=None,
               help="classes of the head (default: 10 for vit_micro, 1000 otherwise, or the "
                    "folder count)")
    add_option(parser, "--global-batch-size", type=positive_int, default=None,
               help="samples per optimizer step over all ranks, kept when the job runs on fewer ranks (an "
                    "elastic job: more accumulation per rank); a multiple of --batch-size. Default: batch-size "
                    "x ranks")
    add_option(parser, "--data-workers", type=non_negative_int, default=None,
               help="DataLoader workers per rank for --data-dir (default: cpus / local ranks)")
