"""The training loop every bundled script shares: steps, the step-boundary agreement between
ranks (stop, time-based checkpoint, loss), checkpoints through a pluggable checkpointer, and the
metric lines that `trainctl watch` reads.

A script supplies the step itself (a function doing one optimizer step and returning the loss
on the device) and a checkpointer (whole-state files, or sharded torch.distributed.checkpoint).
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from dataclasses import dataclass
from typing import Callable, Protocol

import torch
from trainctl_runtime import DeviceOps, DistContext, StopSignal, emit


def warmup_cosine(warmup_steps: int, total_steps: int) -> Callable[[int], float]:
    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return factor


class Checkpointer(Protocol):
    """Saves and restores a run's whole training state; both calls are collective."""

    def save(self, step: int) -> str | None:
        """Write the state of ``step``; returns where (on the main rank)."""

    def resume(self) -> int | None:
        """Load the newest complete checkpoint that every rank can read; its step, or None."""


@dataclass(frozen=True)
class StepWork:
    """What one optimizer step processes over all ranks, for the throughput lines."""

    samples: int
    tokens: int = 0           # 0: not a token model, no tokens_per_s
    model_flops: float = 0.0  # training FLOPs of the model (no recomputation); 0: no mfu line
    peak_flops: float = 0.0   # every rank's accelerator together, per second; 0: no mfu line


@dataclass
class Trainer:
    args: argparse.Namespace
    ops: DeviceOps
    ctx: DistContext
    stop: StopSignal
    checkpointer: Checkpointer | None
    work: StepWork
    step: int = 0
    last_saved_step: int = -1

    def save(self) -> None:
        """Collective; a no-op when this step is already saved or checkpoints are off."""
        if self.checkpointer is None or self.step == self.last_saved_step:
            return
        started = time.perf_counter()
        path = self.checkpointer.save(self.step)
        self.last_saved_step = self.step
        if self.ctx.is_main:
            emit(f"checkpoint step={self.step} seconds={time.perf_counter() - started:.3f} "
                 f"path={path}")

    def resume(self) -> None:
        if self.checkpointer is None:
            return
        step = self.checkpointer.resume()
        if step is not None:
            self.step = self.last_saved_step = step

    def _emit_metrics(self, loss: float, steps: int, elapsed: float) -> None:
        work = self.work
        line = (f"step={self.step} loss={loss:.6f} "
                f"samples_per_s={work.samples * steps / elapsed:.2f}")
        if work.tokens:
            line += f" tokens_per_s={work.tokens * steps / elapsed:.1f}"
        emit(line)
        if work.model_flops and work.peak_flops:
            achieved = work.model_flops * steps / elapsed
            # Model FLOPs utilisation (PaLM's definition): the model's own FLOPs, activation
            # recomputation not counted, over the accelerators' dense peak.
            emit(f"mfu={achieved / work.peak_flops:.4f} model_tflops_per_s={achieved / 1e12:.4g} "
                 f"peak_tflops={work.peak_flops / 1e12:.1f}")

    def train(self, step_fn: Callable[[], torch.Tensor]) -> str:
        """Train to --steps; returns "done" or the name of the signal that stopped it.

        ``step_fn`` does optimizer step number ``self.step`` and returns its loss (detached,
        still on the device)."""
        args, ctx, ops = self.args, self.ctx, self.ops
        # Per-step losses stay on the device until a log step: reading one every step would
        # make the host wait for the device. (A list rather than a running sum keeps XLA's step
        # graph the same on every step, so it compiles once.)
        window_losses: list[torch.Tensor] = []
        ops.synchronize()
        window_start = time.perf_counter()
        last_checkpoint_time = time.monotonic()
        while self.step < args.steps:
            window_losses.append(step_fn())
            self.step += 1

            # The step boundary. One control all-reduce per step carries: SIGTERM seen by any
            # rank, time-based checkpoint due on any rank, and (on log steps) the loss sum.
            log_now = self.step % args.log_every == 0 or self.step == args.steps
            window_steps = len(window_losses)
            local_loss = float(torch.stack(window_losses).mean().item()) if log_now else 0.0
            checkpoint_due_by_time = (args.checkpoint_seconds > 0 and self.checkpointer is not None
                                      and time.monotonic() - last_checkpoint_time
                                      >= args.checkpoint_seconds)
            stop_votes, time_votes, loss_total = ctx.sum(
                [1.0 if self.stop.requested else 0.0, 1.0 if checkpoint_due_by_time else 0.0,
                 local_loss])
            if log_now:
                ops.synchronize()
                if ctx.is_main:
                    self._emit_metrics(loss_total / ctx.world_size, window_steps,
                                       time.perf_counter() - window_start)
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


def match_uninterrupted_buckets(model: torch.nn.Module, sample: torch.Tensor, resumed_at: int) -> None:
    """After a resume, lay out DDP's gradient buckets as the uninterrupted run had them at this step.

    DDP lays its buckets out again after its first backward (in the order the gradients became ready), which the
    uninterrupted run did at step 1. An all-reduce over 3 or more ranks sums each element in an order set by its
    place in the bucket (gloo's and NCCL's rings), so a resumed run whose first step used the first layout ended
    with other last bits than the uninterrupted run (same losses to six digits, another `final_state_sha256`). One
    forward and backward here, on zeros in eval mode (no dropout draw, no running-statistics update), whose
    gradients are dropped, makes DDP lay them out before the first real step: the resumed run then sums as the
    uninterrupted one did, bit for bit. Every rank calls it (the backward all-reduces); no DDP (one process, FSDP):
    nothing to do."""
    if not resumed_at or not isinstance(model, torch.nn.parallel.DistributedDataParallel):
        return
    was_training = model.training
    model.eval()
    try:
        with warnings.catch_warnings():  # a one-sample batch's grads may have other strides than the bucket views
            warnings.simplefilter("ignore", UserWarning)
            model(sample).float().sum().backward()
    finally:
        model.train(was_training)
    for p in model.parameters():
        p.grad = None
