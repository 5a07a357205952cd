"""The ViT job of train_ddp.py and train_neuron.py, and the one import those scripts need.

The shared code is split by concern into sibling modules, all shipped with this folder
(SageMaker extracts it to /opt/ml/code, EC2 nodes get a copy) and imported as plain modules:

    trainctl_args.py        arguments (SageMaker-style strings included), platform environment
    trainctl_runtime.py     output lines, Spot-notice flag, process layout, DeviceOps, RNG
    trainctl_checkpoint.py  whole-state self-verifying checkpoint files, the state hash
    trainctl_sharded.py     sharded torch.distributed.checkpoint checkpoints (train_lm.py)
    trainctl_loop.py        the training loop, step-boundary agreement, metric lines
    trainctl_vision.py      timm model factory, synthetic and image-folder data

This module re-exports their names, so ``import trainctl_common as common`` gives a ViT script
everything, and adds ``run``: the whole ViT job for a given ``DeviceOps``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from trainctl_args import (SAGEMAKER_CHECKPOINT_DIR, add_option, finish_args,  # noqa: F401
                           non_negative_float, non_negative_int, on_sagemaker, optional_path,
                           parse_args, platform_summary, positive_int, str2bool)
from trainctl_args import build_parser as _base_parser
from trainctl_checkpoint import (CHECKPOINT_FORMAT, CHECKPOINT_RE, CheckpointStore,  # noqa: F401
                                 FullStateCheckpointer, checkpoint_name, file_sha256,
                                 load_checkpoint_file, state_sha256, tree_to_cpu)
from trainctl_elastic import ChunkPlan, plan_chunks
from trainctl_loop import StepWork, Trainer, match_uninterrupted_buckets, warmup_cosine  # noqa: F401
from trainctl_runtime import (DeviceOps, DistContext, StopSignal, capture_rng, stopped_exit,  # noqa: F401
                              emit, mix_seed, restore_rng, seed_host_rngs, warn)
from trainctl_vision import (DEFAULT_MODEL, HostShare, ImageFolderData, ShardedEpochSampler,  # noqa: F401
                             SyntheticTask, add_vision_options, create_model,
                             default_num_classes, model_image_size)

# Recorded in every checkpoint; a resume with different values of these is a different run.
RUN_IDENTITY = ("model", "num_classes", "batch_size", "global_batch_size", "steps", "lr", "warmup_steps", "seed",
                "bf16", "data_dir")


def build_parser(description: str, devices: Sequence[str]) -> argparse.ArgumentParser:
    """The ViT scripts' flags: the shared ones plus model, classes and data workers."""
    parser = _base_parser(description, devices, data_help=(
        "image folder (class per sub-folder); default SM_CHANNEL_TRAIN, else synthetic data"))
    add_vision_options(parser)
    return parser


def _real_data(args: argparse.Namespace, ctx: DistContext, ops: DeviceOps,
               image_size: int, plan: ChunkPlan) -> ImageFolderData | None:
    if not args.data_dir:
        return None
    share = HostShare(ctx, args.data_classes) if getattr(args, "data_sharded", False) else None
    return ImageFolderData(args.data_dir, image_size=image_size, seed=args.seed, ctx=ctx,
                           batch_size=args.batch_size, workers=args.data_workers,
                           pin_memory=ops.name == "cuda", share=share, plan=plan)


def _source(args: argparse.Namespace, ctx: DistContext, ops: DeviceOps, image_size: int,
            data: ImageFolderData | None, checkpointer, start: int
            ) -> Callable[[int, int], tuple[torch.Tensor, torch.Tensor]]:
    """chunk(step, c): micro-batch c of optimizer step `step` (trainctl_elastic.py). Synthetic chunks are drawn from
    (seed, step, c) alone; the channel's come in this rank's order from the data position (ImageFolderData)."""
    if data is None:
        task = SyntheticTask(args.seed, args.num_classes, image_size, ops)
        return lambda step, chunk: task.batch(step, chunk, args.batch_size)
    data.start(start, checkpointer.resumed_data(ctx.rank) if checkpointer else None)
    stream = data.batches()
    return lambda step, chunk: next(stream)


def _data_line(data: ImageFolderData, rank: int, step: int) -> str:
    """What this rank read: in this run, in the whole job, and where it stands (the job's log says it)."""
    pos = data.position(step)
    return (f"data rank={rank} source={data.kind} samples_read={pos['read'] - data.read_before} "
            f"total_read={pos['read']} epoch={pos['epoch']} batch={pos['batch']} "
            f"dataset_samples={pos['samples']}")


def _num_classes(args: argparse.Namespace, ctx: DistContext) -> int:
    """Collective with a sharded channel: every host's class folders together are the job's classes."""
    num_classes, args.data_classes = args.num_classes, None
    if args.data_dir and getattr(args, "data_sharded", False):
        from trainctl_data import folder_classes, job_classes
        found = job_classes(ctx.gather(folder_classes(args.data_dir)))
        args.data_classes = None if isinstance(found, int) else found
        num_classes = num_classes or (found if isinstance(found, int) else len(found))
    elif args.data_dir:
        # The folder (or the shards' labels) decide the classes unless told otherwise.
        from trainctl_data import count_classes
        num_classes = num_classes or count_classes(args.data_dir)
    return num_classes or default_num_classes(args.model)


def _vision_step(args: argparse.Namespace, ops: DeviceOps, model: torch.nn.Module,
                 optimizer: torch.optim.Optimizer, scheduler: Any, trainer: Trainer, plan: ChunkPlan,
                 chunk: Callable[[int, int], tuple[torch.Tensor, torch.Tensor]]):
    """One optimizer step on this rank's chunks of the global batch (trainctl_elastic.py); returns its loss, still on
    the device. DDP all-reduces once, in the last chunk's backward: ranks with one chunk more or less each still
    reduce exactly once per step."""
    def step_fn() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        mine = plan.mine
        total = None
        for index, c in enumerate(mine):
            images, labels = chunk(trainer.step, c)
            images = images.to(ops.device, non_blocking=True)
            labels = labels.to(ops.device, non_blocking=True)
            # no_sync covers the backward too: DDP reads the flag that the forward recorded
            quiet = index < len(mine) - 1 and hasattr(model, "no_sync")
            with (model.no_sync() if quiet else contextlib.nullcontext()):
                with ops.autocast(args.bf16):
                    logits = model(images)
                loss = F.cross_entropy(logits.float(), labels)
                if plan.weight != 1.0:   # the full layout's one chunk per rank: today's step, bit for bit
                    loss = loss * plan.weight
                loss.backward()
            total = loss.detach() if total is None else total + loss.detach()
        ops.optimizer_step(optimizer)
        scheduler.step()
        ops.step_end()
        return total
    return step_fn


def _chunk_plan(args: argparse.Namespace, ctx: DistContext) -> ChunkPlan:
    """The step's global batch, kept whatever the number of ranks (an elastic job's shrunk world accumulates more)."""
    plan = plan_chunks(getattr(args, "global_batch_size", None), args.batch_size, ctx.rank, ctx.world_size)
    args.global_batch_size = plan.global_batch
    if ctx.is_main and plan.chunks != ctx.world_size:
        emit(f"elastic global_batch={plan.global_batch} chunks={plan.chunks} world_size={ctx.world_size} "
             f"chunks_per_rank={plan.passes}")
    return plan


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
    args.num_classes = _num_classes(args, ctx)
    plan = _chunk_plan(args, ctx)
    # Same initial weights on every rank and in every run: seeded before the model is built.
    seed_host_rngs(mix_seed(args.seed, "init"))
    model = create_model(args.model, args.num_classes)
    image_size = model_image_size(model)
    # Then per-rank host RNG streams (anything random on the host differs between ranks).
    seed_host_rngs(mix_seed(args.seed, "host", 0, ctx.rank))

    model = ops.prepare_model(model, args)
    optimizer = torch.optim.Adam(ops.unwrap(model).parameters(), lr=args.lr,
                                 **ops.optimizer_kwargs())
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_cosine(args.warmup_steps, args.steps))
    checkpointer = None
    if args.checkpoint_dir:
        checkpointer = FullStateCheckpointer(
            CheckpointStore(args.checkpoint_dir, args.keep), ops, ctx, model, optimizer,
            scheduler, identity={key: getattr(args, key, None) for key in RUN_IDENTITY},
            seed=args.seed)
    data = _real_data(args, ctx, ops, image_size, plan)
    if checkpointer is not None and data is not None:
        checkpointer.data_state = data.position   # each rank's place in the data, in every checkpoint
    trainer = Trainer(args=args, ops=ops, ctx=ctx, stop=stop, checkpointer=checkpointer,
                      work=StepWork(samples=plan.global_batch))
    trainer.resume()
    chunk = _source(args, ctx, ops, image_size, data, checkpointer, trainer.step)
    match_uninterrupted_buckets(model, torch.zeros(1, 3, image_size, image_size, device=ops.device), trainer.step)
    model.train()
    outcome = trainer.train(_vision_step(args, ops, model, optimizer, scheduler, trainer, plan, chunk))
    # Always leave a checkpoint of where we are: after a stop it is what the platform resumes
    # from; after the last step it makes a rerun of a finished job a no-op.
    trainer.save()
    if data is not None:
        emit(_data_line(data, ctx.rank, trainer.step))
    if outcome != "done":
        code = stopped_exit(outcome, ctx.rank, trainer.step)
        ops.finish(ctx)
        ops.shutdown(ctx)
        return code

    model_state = tree_to_cpu(ops.unwrap(model).state_dict())
    digest = state_sha256(model_state, tree_to_cpu(optimizer.state_dict()))
    if ctx.is_main:
        if args.model_dir:
            write_model(args.model_dir, model_state, args)
        emit(f"final_state_sha256={digest}")
    ops.finish(ctx)
    ops.shutdown(ctx)
    return 0


def write_model(model_dir: str, state: dict[str, Any], args: argparse.Namespace,
                extra: dict[str, Any] | None = None) -> None:
    """The trained weights where SageMaker uploads them from (/opt/ml/model), atomically."""
    os.makedirs(model_dir, exist_ok=True)
    final = os.path.join(model_dir, "model.pt")
    temp = final + f".{os.getpid()}.tmp"
    meta = extra if extra is not None else {"model": args.model, "num_classes": args.num_classes}
    with open(temp, "wb") as handle:
        torch.save({**meta, "state_dict": state}, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, final)
    emit(f"model path={final}")
