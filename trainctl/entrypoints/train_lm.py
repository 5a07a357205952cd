"""A decoder-only transformer language model trained with PyTorch FSDP, preemption-proof.

Run it under torchrun, unchanged on SageMaker, on EC2 and locally:

    torchrun --standalone --nproc_per_node=8 train_lm.py --preset 7b --batch-size 1 \
        --global-batch-size 512 --steps 10000 --checkpoint-dir /mnt/ckpt --peak-tflops 989

- FSDP (fully_shard) over all ranks, or hybrid: sharded within a node, replicated across nodes;
  or none: replicated with DDP (bf16 autocast), for a model that fits one accelerator whole.
- bf16 compute with fp32 master weights and fp32 gradient reduction (fp32 on a CPU without
  native bf16), activation checkpointing per block, gradient accumulation up to the planned
  global batch.
- Sharded, atomic, self-verifying checkpoints with torch.distributed.checkpoint
  (trainctl_sharded.py); the rest (arguments, signals, the loop, metric lines) is the
  trainctl_*.py modules shared with train_ddp.py and train_neuron.py.
"""

from __future__ import annotations

import signal
import sys

# A Spot notice can arrive while torch is still importing (seconds on a busy host): note it from
# the first line on instead of dying by the default SIGTERM action, and hand it over below.
_EARLY_SIGNALS: list = []
signal.signal(signal.SIGTERM, lambda signum, frame: _EARLY_SIGNALS.append(signum))

import torch  # noqa: E402  (after the early handler on purpose)
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import trainctl_args as targs  # noqa: E402
from trainctl_elastic import ChunkPlan  # noqa: E402
from trainctl_lm_args import build_lm_parser, resolve_lm_args  # noqa: E402
from trainctl_lm_data import SyntheticTokens, TokenShards, find_token_files  # noqa: E402
from trainctl_lm_model import (DecoderLM, config_from_args, param_count,  # noqa: E402
                               rotary_tables, training_flops_per_token)
from trainctl_loop import StepWork, Trainer, match_uninterrupted_buckets, warmup_cosine  # noqa: E402
from trainctl_runtime import (DistContext, StopSignal, emit, mix_seed, stopped_exit,  # noqa: E402
                              seed_host_rngs, warn)
from trainctl_sharded import ShardedCheckpointer, ShardedCheckpointStore  # noqa: E402
from trainctl_torchdev import TorchDeviceOps, pick_device  # noqa: E402

STOP = StopSignal().install((signal.SIGTERM,), early=_EARLY_SIGNALS)

# Built on the meta device and initialised shard by shard above this size: a full fp32 copy
# of a 7B model per rank (27 GB x 8 ranks) would not fit a host's memory.
META_INIT_PARAMS = 1e9


class FsdpDeviceOps(TorchDeviceOps):
    """CUDA (NCCL, or smddp) or CPU (gloo), the model sharded with FSDP's fully_shard, or
    replicated with DDP (--sharding none)."""

    def setup(self, ctx: DistContext) -> None:
        super().setup(ctx)
        if not dist.is_initialized():
            # FSDP needs a process group even alone (one GPU): a one-rank group in memory.
            dist.init_process_group("nccl" if self.name == "cuda" else "gloo",
                                    store=dist.HashStore(), rank=0, world_size=1)

    def shard(self, model: DecoderLM, ctx: DistContext, args) -> DecoderLM:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        if args.sharding == "none":
            if ctx.world_size == 1:
                return model
            from torch.nn.parallel import DistributedDataParallel
            device_ids = [self.device.index] if self.name == "cuda" else None
            return DistributedDataParallel(model, device_ids=device_ids)

        nodes = ctx.world_size // ctx.local_world_size
        if args.sharding == "hybrid" and nodes > 1:
            # HSDP: state sharded over a node's ranks (fast NVLink), replicated across nodes,
            # so only gradient all-reduces cross the slower network.
            mesh = init_device_mesh(self.device.type, (nodes, ctx.local_world_size),
                                    mesh_dim_names=("replicate", "shard"))
        else:
            mesh = init_device_mesh(self.device.type, (ctx.world_size,),
                                    mesh_dim_names=("shard",))
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if args.bf16 else None,
                                      reduce_dtype=torch.float32)
        for block in model.blocks:
            fully_shard(block, mesh=mesh, mp_policy=policy)
        fully_shard(model, mesh=mesh, mp_policy=policy)
        return model


def build_model(args, config, ops: FsdpDeviceOps, ctx: DistContext) -> DecoderLM:
    # Same initial weights on every rank and in every run: seeded before the model is built.
    seed_host_rngs(mix_seed(args.seed, "init"))
    # DDP broadcasts real weights from rank 0 when it wraps the model: no meta device for it.
    meta = args.sharding != "none" and (args.meta_init == "true" or (
        args.meta_init == "auto" and param_count(config) >= META_INIT_PARAMS))
    if not meta:
        model = DecoderLM(config, args.activation_checkpointing).to(ops.device)
        if args.compile:
            for block in model.blocks:
                block.compile()
        return ops.shard(model, ctx, args)
    with torch.device("meta"):
        model = DecoderLM(config, args.activation_checkpointing)
    if args.compile:
        for block in model.blocks:
            block.compile()
    model = ops.shard(model, ctx, args)
    model.to_empty(device=ops.device)
    with torch.no_grad():
        model.rotary = rotary_tables(config.seq_len, config.hidden // config.heads).to(ops.device)
        model.init_weights()  # on the shards (DTensor random ops), seeded above
    return model


def make_optimizer(model: torch.nn.Module, args) -> torch.optim.Optimizer:
    # No weight decay on norms (1-D): the usual practice for transformer LMs.
    decay = [p for p in model.parameters() if p.ndim >= 2]
    other = [p for p in model.parameters() if p.ndim < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                              {"params": other, "weight_decay": 0.0}],
                             lr=args.lr, betas=(0.9, 0.95), eps=1e-8)


def make_data(args, config, ops, ctx: DistContext, plan: ChunkPlan):
    """The data source and the chunks this rank takes of it. A sharded channel is a stream per host: its ranks
    split the host's chunks of each step (no elastic promise: the hosts' files decide)."""
    if args.data_dir:
        sharded = getattr(args, "data_sharded", False)
        if sharded:
            plan = ChunkPlan(plan.passes * ctx.local_world_size, args.batch_size, ctx.local_rank,
                             ctx.local_world_size)
        paths = find_token_files(args.data_dir, args.data_file)
        return TokenShards(paths, args.token_dtype, args.seed, config.vocab_size, config.seq_len,
                           ops.device, ctx, step_samples=plan.global_batch, sharded=sharded), plan
    return SyntheticTokens(args.seed, config.vocab_size, config.seq_len, ops), plan


def final_state(model, optimizer, ctx: DistContext, args, config) -> None:
    """The full, gathered state: its hash (and the model file) from the main rank."""
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                         get_optimizer_state_dict)
    from trainctl_checkpoint import state_sha256
    from trainctl_common import write_model

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    model_state = get_model_state_dict(model, options=options)
    optim_state = get_optimizer_state_dict(model, optimizer, options=options)
    if ctx.is_main:
        if args.model_dir:
            write_model(args.model_dir, model_state, args,
                        extra={"model": f"lm-{args.preset}", "config": config.as_dict()})
        emit(f"final_state_sha256={state_sha256(model_state, optim_state)}")


def replicated_forward(model, args, ops, last: bool):
    """Under DDP: bf16 autocast (FSDP casts its parameters itself) and no gradient all-reduce
    before the last micro-batch. Nothing under FSDP."""
    from contextlib import ExitStack

    stack = ExitStack()
    if args.sharding == "none":
        stack.enter_context(torch.autocast(ops.autocast_device_type, dtype=torch.bfloat16,
                                           enabled=args.bf16))
        if not last and hasattr(model, "no_sync"):
            # no_sync must cover the backward too: the caller's backward runs after the forward,
            # and DDP reads the flag that the forward recorded.
            stack.enter_context(model.no_sync())
    return stack


def lm_step(args, ops, ctx: DistContext, trainer: Trainer, model, optimizer, scheduler, data,
            plan: ChunkPlan):
    """Optimizer step number trainer.step over this rank's chunks of the global batch
    (trainctl_elastic.py); returns the loss."""
    passes = plan.padded()

    def step_fn() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        total = torch.zeros((), device=ops.device)
        # FSDP reduce-scatters each micro-batch's gradients into the sharded ones (no
        # no_sync): unsharded gradients of a whole model would not fit where FSDP is needed.
        # So every rank runs the same number of micro-batches: a rank with one chunk fewer
        # runs a weight-0 one. DDP (which holds them anyway) all-reduces once, after the last.
        for index, (chunk, weight) in enumerate(passes):
            tokens = data.batch(trainer.step, chunk, args.batch_size)
            with replicated_forward(model, args, ops, last=index == len(passes) - 1):
                logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.float().flatten(0, 1), tokens[:, 1:].flatten()) * weight
            loss.backward()
            total += loss.detach()
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()
        scheduler.step()
        return total
    return step_fn


def run(args, config, ops: FsdpDeviceOps, stop: StopSignal) -> int:
    ctx = DistContext.from_env()
    ops.setup(ctx)
    plan = resolve_lm_args(args, ctx.rank, ctx.world_size)
    accum = plan.passes
    if ctx.is_main:
        summary = " ".join(f"{k}={v}" for k, v in targs.platform_summary().items())
        emit(f"start device={ops.name} world_size={ctx.world_size} model=lm-{args.preset} "
             f"params={param_count(config)} seq_len={config.seq_len} "
             f"batch_size={args.batch_size} grad_accum={accum} "
             f"global_batch={plan.global_batch} sharding={args.sharding} "
             f"precision={'bf16' if args.bf16 else 'fp32'} steps={args.steps} {summary}")
        if args.checkpoint_dir is None:
            warn("no --checkpoint-dir: this run cannot be resumed after an interruption")
    model = build_model(args, config, ops, ctx)
    seed_host_rngs(mix_seed(args.seed, "host", 0, ctx.rank))
    optimizer = make_optimizer(model, args)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_cosine(args.warmup_steps, args.steps))
    checkpointer = None
    if args.checkpoint_dir:
        identity = {**config.as_dict(), **{key: getattr(args, key) for key in (
            "preset", "batch_size", "steps", "lr", "warmup_steps", "seed", "bf16", "data_dir",
            "data_file", "weight_decay", "grad_clip", "global_batch_size")}}
        checkpointer = ShardedCheckpointer(
            ShardedCheckpointStore(args.checkpoint_dir, args.keep), ops, ctx, model, optimizer,
            scheduler, identity=identity, seed=args.seed)
    sequences = plan.global_batch
    work = StepWork(samples=sequences, tokens=sequences * config.seq_len,
                    model_flops=training_flops_per_token(config) * sequences * config.seq_len,
                    peak_flops=args.peak_tflops * 1e12 * ctx.world_size)
    trainer = Trainer(args=args, ops=ops, ctx=ctx, stop=stop, checkpointer=checkpointer,
                      work=work)
    data, plan = make_data(args, config, ops, ctx, plan)
    if checkpointer is not None and isinstance(data, TokenShards):
        checkpointer.data_state = data.position   # where the data stands, in every checkpoint
    trainer.resume()
    if isinstance(data, TokenShards):
        data.start(trainer.step, checkpointer.resumed_data if checkpointer else None)
    match_uninterrupted_buckets(model, torch.zeros(1, config.seq_len, dtype=torch.long, device=ops.device),
                                trainer.step)
    model.train()
    outcome = trainer.train(lm_step(args, ops, ctx, trainer, model, optimizer, scheduler, data,
                                    plan))
    trainer.save()  # where a stop resumes from; makes a rerun of a finished job a no-op
    if isinstance(data, TokenShards):   # sequences this rank read: in this run, and in the whole job
        emit(f"data rank={ctx.rank} source={data.kind} samples_read={data.rows_read} "
             f"total_read={trainer.step * len(plan.mine) * args.batch_size} "
             f"position={data.read_at(trainer.step)}")
    code = stopped_exit(outcome, ctx.rank, trainer.step) if outcome != "done" else 0
    if outcome == "done":
        final_state(model, optimizer, ctx, args, config)
    ops.shutdown(ctx)
    return code


def main(argv=None) -> int:
    parser = build_lm_parser()
    args = targs.parse_args(parser, argv)
    device_kind = pick_device(parser, args.device)
    if (device_kind == "cpu" and args.bf16
            and not torch.ops.mkldnn._is_mkldnn_bf16_supported()):
        # Emulated bf16 is many times slower than fp32 on such CPUs (see train_ddp.py).
        args.bf16 = False
        if DistContext.from_env().is_main:
            warn("this CPU has no native bf16: training in fp32")
    try:
        config = config_from_args(args)
    except ValueError as exc:
        parser.error(str(exc))
    return run(args, config, FsdpDeviceOps(device_kind, args.dist_backend), STOP)


if __name__ == "__main__":
    sys.exit(main())
