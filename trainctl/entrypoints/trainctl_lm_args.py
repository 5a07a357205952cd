"""train_lm.py's flags: the shared ones (trainctl_args.py) plus the model's size, sharding,
gradient accumulation and the token file. No torch here."""

from __future__ import annotations

import argparse

from trainctl_args import (add_option, build_parser, non_negative_float, optional_path,
                           positive_int, str2bool)

PRESET_NAMES = ("tiny", "125m", "7b")


def build_lm_parser() -> argparse.ArgumentParser:
    parser = build_parser(
        "Train a decoder-only transformer LM with PyTorch FSDP (trainctl entrypoint)",
        devices=("cuda", "cpu"),
        data_help="folder with a tokenized .bin file (flat uint16/uint32 token ids); default "
                  "SM_CHANNEL_TRAIN, else synthetic tokens")
    parser.set_defaults(batch_size=8)

    def add(flag: str, **kwargs) -> None:
        add_option(parser, flag, **kwargs)

    add("--preset", choices=PRESET_NAMES, default="tiny",
        help="tiny (2 layers, width 64), 125m (GPT-3 Small's shape), 7b (LLaMA-7B's shape)")
    for flag, what in (("--vocab-size", "vocabulary"), ("--seq-len", "tokens per sequence"),
                       ("--layers", "transformer blocks"), ("--hidden", "model width"),
                       ("--heads", "attention heads"), ("--ffn-hidden", "SwiGLU width")):
        add(flag, type=positive_int, default=None, help=f"{what} (default: the preset's)")
    add("--grad-accum", type=positive_int, default=None,
        help="micro-batches per optimizer step (default 1, or from --global-batch-size)")
    add("--global-batch-size", type=positive_int, default=None,
        help="sequences per optimizer step over all ranks: batch-size x ranks x accumulation")
    add("--sharding", choices=("full", "hybrid", "none"), default="full",
        help="full: shard over every rank; hybrid: shard within a node, replicate across nodes; "
             "none: replicate (DDP), for a model whose whole state fits one accelerator")
    add("--activation-checkpointing", type=str2bool, default=True,
        help="recompute each block in the backward pass instead of keeping its activations")
    add("--meta-init", choices=("auto", "true", "false"), default="auto",
        help="build on the meta device and initialise the shards in place (auto: above 1B "
             "parameters)")
    add("--compile", type=str2bool, default=False, help="torch.compile each block")
    add("--weight-decay", type=non_negative_float, default=0.1)
    add("--grad-clip", type=non_negative_float, default=1.0, help="max gradient norm; 0 = off")
    add("--data-file", type=optional_path, default=None,
        help="one token file in --data-dir (default: every .bin and .npy shard in it)")
    add("--token-dtype", choices=("uint16", "uint32"), default="uint16",
        help="how the token file stores ids")
    return parser


def resolve_lm_args(args: argparse.Namespace, rank: int, world_size: int):
    """The step's chunks of --batch-size sequences and this rank's share (trainctl_elastic.ChunkPlan).

    --global-batch-size is the step's batch over every rank, kept on any number of ranks that it can be cut for (an
    elastic job on fewer nodes accumulates more); --grad-accum is then what the full layout accumulates, told in the
    start line. Without it: --batch-size x ranks x --grad-accum."""
    from trainctl_elastic import plan_chunks

    plan = plan_chunks(args.global_batch_size, args.batch_size, rank, world_size, args.grad_accum or 1)
    args.grad_accum = plan.passes
    args.global_batch_size = plan.global_batch
    return plan
