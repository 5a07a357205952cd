"""The node's accelerator check and the bundled scripts on this machine's GPU, launched as trainctl's EC2 node agent
launches them (run by scripts/device_check.sh, which finds or installs torch first).

1. the agent's check (trainctl/bootstrap/accelerator_check.py `check`) as a node of this machine's GPU count must
   pass and say SM_NUM_GPUS; as a p5en.48xlarge (8 H200) it must fail in one line unless 8 are here;
2. train_ddp.py (ViT-B/16) and train_lm.py (the 125M preset) under torchrun, one process, with the SM_* variables
   the agent would set (bootstrap/sm_env.py) and its torchrun line (bootstrap/launch_command.py): samples/s and
   MFU (train_lm.py prints its own; for the ViT, the planner's FLOPs: 3 x the forward FLOPs of
   trainctl/spec/architectures.py over the bf16 dense peak of trainctl/catalog/catalog.json);
3. train_ddp.py told it has a GPU (SM_NUM_GPUS=1) while CUDA shows it none: it must stop in one line, never train
   on the CPU.
Without a GPU or a CUDA torch, each part says why it is skipped. Standard library here; torch only in the scripts.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from trainctl.bootstrap import accelerator_check, launch_command, sm_env  # noqa: E402

ENTRYPOINTS = REPO / "trainctl" / "entrypoints"
STEP = re.compile(r"trainctl step=(\d+) loss=(\S+) samples_per_s=([0-9.]+)")
MFU = re.compile(r"trainctl mfu=([0-9.]+) model_tflops_per_s=(\S+) peak_tflops=([0-9.]+)")
VIT = "vit_base_patch16_224"
VIT_ARGS = ["--model", VIT, "--batch-size", "128", "--steps", "300", "--log-every", "25", "--bf16", "true",
            "--checkpoint-seconds", "0"]
LM_ARGS = ["--preset", "125m", "--batch-size", "8", "--steps", "200", "--log-every", "25", "--sharding", "none",
           "--activation-checkpointing", "false", "--checkpoint-seconds", "0"]


def forward_flops(architecture: str) -> float:
    """The planner's forward FLOPs per sample (trainctl/spec/architectures.py), read from its file: the package
    trainctl.spec needs pydantic, which this machine may lack."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("architectures", REPO / "trainctl" / "spec" / "architectures.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["architectures"] = module  # dataclasses resolve the module's annotations through sys.modules
    spec.loader.exec_module(module)
    return module.ARCHITECTURES[architecture].forward_flops_per_sample


def say(line: str) -> None:
    print(line, flush=True)


def peak_bf16_tflops(gpu_name: str) -> float | None:
    """The catalog's bf16 dense peak of this GPU; an H200 has the H100 SXM's Hopper tensor cores (989 dense: NVIDIA's
    H200 data sheet prints 1,979 with sparsity)."""
    accelerators = json.loads((REPO / "trainctl" / "catalog" / "catalog.json").read_text()).get("accelerators", {})
    key = "H100" if "H200" in gpu_name else next((k for k in accelerators if k in gpu_name), None)
    return (accelerators.get(key) or {}).get("peak_tflops", {}).get("bf16") if key else None


def check_part() -> dict[str, int]:
    listed, said = accelerator_check.gpus_seen()
    say(f"-- 1. accelerator check: the driver lists {listed} GPU(s){' (' + said + ')' if said else ''}")
    node = {"accelerator": "gpu", "accelerator_count": max(listed, 1), "nproc_per_node": 1,
            "instance_type": f"a {max(listed, 1)}-GPU node"}
    devices = {"num_gpus": 0, "num_neurons": 0}
    for cfg in (node, {**node, "accelerator_count": 8, "instance_type": "p5en.48xlarge"}):
        try:
            got = accelerator_check.check(cfg, lambda line: say("   " + line))
            devices = got if cfg is node else devices
        except SystemExit as stop:
            say(f"   {stop}")
    say(f"   the training is told SM_NUM_GPUS={devices['num_gpus']}")
    return devices


def launch(name: str, script: str, args: list[str], devices: dict[str, int], out: Path, seconds: float,
           extra: dict[str, str] | None = None) -> tuple[int | None, str]:
    """torchrun as the agent runs it on a one-node job; its output in OUT/<name>.log."""
    ml = tempfile.mkdtemp(prefix=f"device-check-{name}-")
    cfg = {"script": script, "args": args, "job_id": f"device-check-{name}", "nproc_per_node": 1}
    sm = sm_env.sm_variables(cfg, ml, 0, 1, {}, "device-check", "lo", devices)
    base = dict(os.environ, PYTHONUNBUFFERED="1", SAGEMAKER_BASE_DIR=ml, **sm, **(extra or {}))
    cmd, env = launch_command.torchrun_command(cfg, ["127.0.0.1"], "127.0.0.1", str(ENTRYPOINTS), 29533, base)
    say(f"   $ SM_NUM_GPUS={sm['SM_NUM_GPUS']} {' '.join(cmd[1:])}")
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, env=env, cwd=str(ENTRYPOINTS), capture_output=True, text=True,
                              timeout=max(10.0, seconds))
        code, text = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as late:
        code = None
        text = (late.stdout or b"").decode(errors="replace") + (late.stderr or b"").decode(errors="replace")
    (out / f"{name}.log").write_text(text)
    say(f"   exit {code if code is not None else 'timeout'} after {time.monotonic() - started:.0f} s "
        f"(output: {name}.log)")
    return code, text


def report(text: str, flops_per_sample: float | None, peak: float | None) -> None:
    rates = [float(m.group(3)) for m in STEP.finditer(text)]
    last = [m.group(0) for m in STEP.finditer(text)][-1:] or ["no step line"]
    device = re.findall(r"trainctl start device=\S+", text)
    say(f"   {last[0]}; {device[0] if device else 'no start line'}")
    if len(rates) < 2:
        return
    steady = statistics.median(rates[1:])  # the first window holds the warm-up
    say(f"   samples/s (median after the first window): {steady:.1f}")
    own = MFU.findall(text)
    if own:
        say(f"   the script's own: mfu={own[-1][0]} model_tflops_per_s={own[-1][1]} peak_tflops={own[-1][2]}")
    elif flops_per_sample and peak:
        say(f"   mfu={steady * flops_per_sample / (peak * 1e12):.3f} (3 x {flops_per_sample / 3e9:.1f} GFLOP forward "
            f"per sample, peak {peak:.0f} TFLOP/s bf16 dense)")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=300.0)
    opts = parser.parse_args()
    deadline = time.monotonic() + opts.seconds
    devices = check_part()
    try:
        import torch
    except ImportError:
        say("-- 2./3. skipped: torch is not importable here")
        return 0
    if not devices["num_gpus"] or not torch.cuda.is_available():
        say(f"-- 2. skipped: no GPU for the training (SM_NUM_GPUS={devices['num_gpus']}, torch {torch.__version__} "
            f"cuda {torch.version.cuda} available {torch.cuda.is_available()})")
    else:
        name = torch.cuda.get_device_name(0)
        peak = peak_bf16_tflops(name)
        say(f"-- 2. {name}, torch {torch.__version__} (CUDA {torch.version.cuda}); bf16 dense peak {peak} TFLOP/s")
        runs = [("lm", "train_lm.py", LM_ARGS + (["--peak-tflops", str(peak)] if peak else []), None)]
        try:
            import timm  # noqa: F401
            runs.insert(0, ("vit", "train_ddp.py", VIT_ARGS, 3 * forward_flops(VIT)))
        except ImportError:
            say("   train_ddp.py skipped: timm is not installed")
        for i, (label, script, args, flops) in enumerate(runs):
            left = deadline - time.monotonic() - 40  # keep time for part 3
            _, text = launch(label, script, args, devices, opts.out, left / (len(runs) - i))
            report(text, flops, peak)
    say("-- 3. a node told it has a GPU whose CUDA shows none (SM_NUM_GPUS=1, CUDA_VISIBLE_DEVICES='')")
    code, text = launch("no-gpu", "train_ddp.py", ["--model", "vit_micro", "--steps", "2", "--batch-size", "4"],
                        {"num_gpus": 1, "num_neurons": 0}, opts.out, max(20.0, deadline - time.monotonic()),
                        {"CUDA_VISIBLE_DEVICES": ""})
    lines = [line for line in text.splitlines() if "trainctl: " in line]
    trained = "trainctl step=" in text
    say(f"   {'OK' if code and not trained and lines else 'NOT CAUGHT'}: exit {code}; "
        f"{lines[0] if lines else 'no one-line failure'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
