"""A tiny data-parallel training script for the sandbox's SageMaker job tests.

It follows the entrypoint contract of trainctl (ARCHITECTURE.md) in miniature, so the sandbox is
tested against the same behaviour the real entrypoint will have:
- runs under torchrun (gloo on CPU, gradients averaged with all_reduce) or alone;
- checkpoints to --checkpoint-dir atomically (temp file, fsync, rename), rank 0 only;
- on SIGTERM: finishes the step, checkpoints, exits 0 (a Spot notice);
- resumes from the newest checkpoint that loads;
- prints `trainctl step=<n> loss=<x> samples_per_s=<y>` on every rank, and
  `trainctl resumed_from=<step>` once at start, so tests can see where each run began.
Pure Python + torch, nothing else.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

_stop = False


def _on_sigterm(signum, frame):
    # Only a flag: the step in flight finishes, then every rank agrees to stop at the same step.
    global _stop
    _stop = True
    print(f"trainctl sigterm rank={os.environ.get('RANK', '0')}", flush=True)


def _newest_checkpoint(folder: Path):
    for path in sorted(folder.glob("ckpt-*.pt"), reverse=True):
        try:
            return torch.load(path, weights_only=False)
        except Exception as exc:  # a torn or foreign file: try the next older one
            print(f"trainctl skip_checkpoint={path.name} reason={exc!r}", file=sys.stderr, flush=True)
    return None


def _save_checkpoint(folder: Path, state: dict, step: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"ckpt-{step:06d}.pt"
    tmp = folder / f".tmp-{final.name}"
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)


def _leave_together() -> None:
    # Rank 0 still writes (a checkpoint, the model) after the last collective. A rank that closed its gloo
    # connections meanwhile can be aborted by gloo's "connection closed by peer" (SIGABRT, which fails the job):
    # every rank waits at a barrier until all are done, then the group goes.
    dist.barrier()
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint-dir", default="/opt/ml/checkpoints")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--step-seconds", type=float, default=0.2)
    parser.add_argument("--checkpoint-every", type=int, default=2)
    parser.add_argument("--fail-at-step", type=int, default=0)
    args = parser.parse_args()

    signal.signal(signal.SIGTERM, _on_sigterm)
    distributed = "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1
    if distributed:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    ckpt_dir = Path(args.checkpoint_dir)
    start = 0
    state = _newest_checkpoint(ckpt_dir) if ckpt_dir.exists() else None
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
    print(f"trainctl resumed_from={start} rank={rank} world={world}", flush=True)

    batch = 16
    step = start
    while step < args.steps:
        t0 = time.perf_counter()
        step += 1
        g = torch.Generator().manual_seed(step * 1000 + rank)
        x = torch.randn(batch, 8, generator=g)
        y = x.sum(dim=1, keepdim=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        if distributed:
            # data parallel by hand: DistributedDataParallel costs ~3 s of imports per start on this CPU
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= world
        opt.step()
        if args.fail_at_step and step == args.fail_at_step:
            raise ValueError(f"synthetic failure at step {step}")
        time.sleep(args.step_seconds)
        rate = batch * world / (time.perf_counter() - t0)
        print(f"trainctl step={step} loss={loss.item():.4f} samples_per_s={rate:.1f}", flush=True)
        # Every rank learns whether any rank was told to stop, so all stop after the same step.
        stop = torch.tensor([1 if _stop else 0])
        if distributed:
            dist.all_reduce(stop, op=dist.ReduceOp.MAX)
        if rank == 0 and (stop.item() or step % args.checkpoint_every == 0):
            _save_checkpoint(ckpt_dir, {"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, step)
        if stop.item():
            print(f"trainctl checkpointed_on_sigterm step={step}", flush=True)
            if distributed:
                _leave_together()
            return 0

    if rank == 0:
        model_dir = Path(os.environ.get("SM_MODEL_DIR", "model"))
        model_dir.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), model_dir / "model.pt")
    print(f"trainctl done step={step}", flush=True)
    if distributed:
        _leave_together()
    return 0


if __name__ == "__main__":
    sys.exit(main())
