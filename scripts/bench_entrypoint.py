"""Benchmark: train_ddp.py against the reference experiment's own training loop.

Both run under `torchrun --standalone --nproc_per_node=N` on this machine with the same model,
per-rank batch, DDP, Adam and bf16 autocast. They differ in what the issue is about:

  reference  timm VisionTransformer() defaults (or vit_micro's shape), and a DataLoader whose
             Dataset returns torch.randn(3, H, W) and a label per sample, num_workers =
             cpus // local world size: the loop as the experiment wrote it.
  trainctl   train_ddp.py: batches generated on the device from a (seed, step, rank)-seeded
             generator, one control all-reduce per step (SIGTERM/checkpoint agreement).

Throughput is global samples/s over the steps after a warm-up window, timed the same way in
both (device synchronised at window boundaries). A third run of train_ddp.py with
--checkpoint-every measures checkpoint seconds, reported as a multiple of one step and as the
share of training time at the chosen interval.

    .venv/bin/python scripts/bench_entrypoint.py                       # ViT-B/16, CPU-sized
    .venv/bin/python scripts/bench_entrypoint.py --batch-size 128 --warmup-steps 10 \
        --measure-steps 50                                             # the GPU-sized run

With --lm-preset it measures train_lm.py instead (FSDP, synthetic tokens): tokens/s, MFU
against --peak-tflops (per accelerator, dense, at the training precision), and the seconds of
a sharded checkpoint (a second run with --checkpoint-every):

    .venv/bin/python scripts/bench_entrypoint.py --lm-preset tiny --batch-size 8 \
        --warmup-steps 5 --measure-steps 20                            # CPU
    .venv/bin/python scripts/bench_entrypoint.py --lm-preset 125m --nproc 1 --batch-size 8 \
        --peak-tflops 989 --warmup-steps 10 --measure-steps 40         # one H100
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRAIN_DDP = REPO / "trainctl" / "entrypoints" / "train_ddp.py"
TRAIN_LM = REPO / "trainctl" / "entrypoints" / "train_lm.py"
METRIC_RE = re.compile(r"^trainctl step=(\d+) loss=(\S+) samples_per_s=([0-9.]+)", re.M)
LM_METRIC_RE = re.compile(r"^trainctl step=(\d+) loss=(\S+) samples_per_s=([0-9.]+) "
                          r"tokens_per_s=([0-9.]+)\ntrainctl mfu=([0-9.]+) ", re.M)
CHECKPOINT_RE = re.compile(r"^trainctl checkpoint step=(\d+) seconds=([0-9.]+) ", re.M)


# ---------------------------------------------------------------------------------------------
# The reference loop (runs inside torchrun when called with --reference-worker)
# ---------------------------------------------------------------------------------------------

def reference_worker(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from timm.models.vision_transformer import VisionTransformer
    from torch.nn.parallel import DistributedDataParallel

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    cuda = args.device == "cuda"
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")

    if args.model == "vit_micro":
        model = VisionTransformer(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=4,
                                  num_classes=10)
        size, classes = 32, 10
    else:
        model = VisionTransformer()  # the experiment's model: ViT-B/16, 224x224, 1000 classes
        size, classes = 224, 1000
    model = DistributedDataParallel(model.to(device), device_ids=[local_rank] if cuda else None)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

    class RandomImages(torch.utils.data.Dataset):
        def __len__(self):
            return args.steps * args.batch_size

        def __getitem__(self, index):
            return torch.randn(3, size, size), torch.randint(0, classes, ()).item()

    loader = torch.utils.data.DataLoader(
        RandomImages(), batch_size=args.batch_size, shuffle=True,
        num_workers=(os.cpu_count() or 1) // local_world, pin_memory=cuda)

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    losses = []
    sync()
    window_start = time.perf_counter()
    for step, (images, labels) in enumerate(loader, start=1):
        images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=args.bf16):
            loss = F.cross_entropy(model(images).float(), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        if step % args.log_every == 0:
            value = torch.stack(losses).mean().item()
            sync()
            elapsed = time.perf_counter() - window_start
            if dist.get_rank() == 0:
                rate = args.batch_size * world * len(losses) / elapsed
                print(f"trainctl step={step} loss={value:.6f} samples_per_s={rate:.2f}",
                      flush=True)
            losses = []
            window_start = time.perf_counter()
        if step >= args.steps:
            break
    dist.destroy_process_group()
    return 0


# ---------------------------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------------------------

def torchrun(nproc: int, script: Path, script_args: list[str]) -> tuple[str, float]:
    env = dict(os.environ)
    # One intra-op thread per core that a rank can have: ranks share the machine's cores.
    env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // nproc))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={nproc}", str(script), *script_args]
    started = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if out.returncode != 0:
        sys.stderr.write(out.stdout[-4000:] + out.stderr[-4000:])
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return out.stdout, wall


def steady_rate(text: str, warmup_steps: int) -> tuple[float, list[float]]:
    """Samples/s over the windows after the warm-up window (equal windows: plain mean)."""
    rates = [float(rate) for step, _, rate in METRIC_RE.findall(text) if int(step) > warmup_steps]
    if not rates:
        raise SystemExit(f"no metric lines after step {warmup_steps}:\n{text[-2000:]}")
    return statistics.mean(rates), rates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", default="vit_base_patch16_224")
    parser.add_argument("--batch-size", type=int, default=4,
                        help="per rank; 128 is the experiment's, far too slow on a 2-core CPU")
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None)
    parser.add_argument("--bf16", choices=("true", "false"), default=None,
                        help="bf16 autocast in both loops (default: true on cuda; false on a CPU "
                             "without native bf16, where autocast is ~30x slower)")
    parser.add_argument("--warmup-steps", type=int, default=1)
    parser.add_argument("--measure-steps", type=int, default=4)
    parser.add_argument("--checkpoint-every", type=int, default=2,
                        help="steps between checkpoints in the checkpoint-overhead run")
    parser.add_argument("--lm-preset", choices=("tiny", "125m", "7b"), default=None,
                        help="measure train_lm.py with this preset instead of the ViT loops")
    parser.add_argument("--peak-tflops", type=float, default=0.0,
                        help="LM: the accelerator's dense peak at the training precision")
    parser.add_argument("--lm-args", default="",
                        help="LM: more train_lm.py flags, e.g. '--activation-checkpointing false'")
    # Used by the worker only.
    parser.add_argument("--steps", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--log-every", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.bf16 is None:
        import torch

        native = args.device == "cuda" or torch.ops.mkldnn._is_mkldnn_bf16_supported()
        args.bf16 = "true" if native else "false"
    if args.reference_worker:
        args.bf16 = args.bf16 == "true"
        return reference_worker(args)
    if args.lm_preset:
        print(json.dumps(bench_lm(args), indent=2))
        return 0

    # Windows of warmup-steps length: the first is the warm-up, the rest are measured.
    window = args.warmup_steps
    if args.measure_steps % window:
        raise SystemExit("--measure-steps must be a multiple of --warmup-steps")
    steps = window + args.measure_steps
    common = ["--model", args.model, "--batch-size", str(args.batch_size), "--steps", str(steps),
              "--log-every", str(window), "--device", args.device, "--bf16", args.bf16]
    ours_args = [*common, "--checkpoint-dir", "none"]

    load_before = os.getloadavg()
    ref_text, ref_wall = torchrun(args.nproc, Path(__file__).resolve(),
                                  ["--reference-worker", *common])
    ours_text, ours_wall = torchrun(args.nproc, TRAIN_DDP, ours_args)
    with tempfile.TemporaryDirectory(prefix="bench-ckpt-") as folder:
        ckpt_text, _ = torchrun(args.nproc, TRAIN_DDP, [
            *common, "--checkpoint-dir", folder, "--checkpoint-every", str(args.checkpoint_every),
            "--checkpoint-seconds", "0", "--keep", "2"])
        checkpoint_bytes = max((p.stat().st_size for p in Path(folder).glob("ckpt-*.pt")),
                               default=0)

    ref_rate, ref_rates = steady_rate(ref_text, window)
    ours_rate, ours_rates = steady_rate(ours_text, window)
    # In-loop checkpoints only (the one written after the last step is outside training).
    ckpt_seconds = [float(s) for step, s in CHECKPOINT_RE.findall(ckpt_text) if int(step) < steps]
    global_batch = args.batch_size * args.nproc
    step_seconds = global_batch / ours_rate
    ckpt_mean = statistics.mean(ckpt_seconds) if ckpt_seconds else float("nan")
    summary = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, {platform.processor() or ''}"
                   .strip(", "),
        "cpu_model": _cpu_model(),
        "device": args.device,
        "bf16_autocast": args.bf16 == "true",
        "load_average_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "nproc": args.nproc,
        "model": args.model,
        "batch_size_per_rank": args.batch_size,
        "warmup_steps": window,
        "measured_steps": args.measure_steps,
        "reference_samples_per_s": round(ref_rate, 2),
        "trainctl_samples_per_s": round(ours_rate, 2),
        "speedup": round(ours_rate / ref_rate, 3),
        "reference_window_rates": ref_rates,
        "trainctl_window_rates": ours_rates,
        "step_seconds": round(step_seconds, 3),
        "checkpoint_bytes": checkpoint_bytes,
        "checkpoint_seconds_mean": round(ckpt_mean, 3),
        "checkpoint_seconds_all": ckpt_seconds,
        "checkpoint_in_steps": round(ckpt_mean / step_seconds, 3),
        "checkpoint_share_at_interval": round(
            ckpt_mean / (ckpt_mean + args.checkpoint_every * step_seconds), 4),
        "checkpoint_every": args.checkpoint_every,
        "checkpoint_share_every_600s": round(ckpt_mean / 600.0, 5),
        "wall_seconds": {"reference": round(ref_wall, 1), "trainctl": round(ours_wall, 1)},
    }
    print(json.dumps(summary, indent=2))
    return 0


def bench_lm(args: argparse.Namespace) -> dict:
    """train_lm.py: steady tokens/s and MFU, then a run with sharded checkpoints."""
    window = args.warmup_steps
    if args.measure_steps % window:
        raise SystemExit("--measure-steps must be a multiple of --warmup-steps")
    steps = window + args.measure_steps
    common = ["--preset", args.lm_preset, "--batch-size", str(args.batch_size), "--steps",
              str(steps), "--log-every", str(window), "--device", args.device, "--bf16",
              args.bf16, "--peak-tflops", str(args.peak_tflops), *args.lm_args.split()]
    load_before = os.getloadavg()
    text, wall = torchrun(args.nproc, TRAIN_LM, [*common, "--checkpoint-dir", "none"])
    windows = [(int(step), float(loss), float(tokens), float(mfu))
               for step, loss, _, tokens, mfu in LM_METRIC_RE.findall(text)]
    measured = [w for w in windows if w[0] > window]
    if not measured:
        raise SystemExit(f"no metric lines after step {window}:\n{text[-2000:]}")
    with tempfile.TemporaryDirectory(prefix="bench-lm-ckpt-") as folder:
        ckpt_text, _ = torchrun(args.nproc, TRAIN_LM, [
            *common, "--checkpoint-dir", folder, "--checkpoint-every", str(args.checkpoint_every),
            "--checkpoint-seconds", "0", "--keep", "2"])
        checkpoint_bytes = sum(p.stat().st_size for p in Path(folder).glob("step-*/*"))
    ckpt_seconds = [float(s) for step, s in CHECKPOINT_RE.findall(ckpt_text) if int(step) < steps]
    start = re.search(r"^trainctl start .*$", text, re.M)
    tokens_per_s = statistics.mean(w[2] for w in measured)
    return {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus",
        "cpu_model": _cpu_model(),
        "gpu": _gpu_name() if args.device == "cuda" else None,
        "torch": _torch_version(),
        "load_average_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "start_line": start.group(0) if start else None,
        "nproc": args.nproc,
        "extra_args": args.lm_args,
        "warmup_steps": window,
        "measured_steps": args.measure_steps,
        "tokens_per_s": round(tokens_per_s, 1),
        "mfu": round(statistics.mean(w[3] for w in measured), 4) if args.peak_tflops else None,
        "peak_tflops_per_accelerator": args.peak_tflops or None,
        "window_tokens_per_s": [w[2] for w in measured],
        "loss_first_last": [windows[0][1], windows[-1][1]],
        "checkpoint_bytes": checkpoint_bytes,
        "checkpoint_seconds_all": ckpt_seconds,
        "wall_seconds": round(wall, 1),
    }


def _gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name(0)


def _torch_version() -> str:
    import torch

    return torch.__version__


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
