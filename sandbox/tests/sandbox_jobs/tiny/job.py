"""A torch-free job for the sandbox's fast SageMaker tests: start-up in milliseconds, not seconds.

--mode ok:    print a few `trainctl step=` lines, save a model file, exit 0.
--mode fail:  print to stderr and raise (the job must end Failed with this error quoted).
--mode sleep: print steps slowly until SIGTERM, then write a checkpoint and exit 0.
It also dumps the SM_* environment and its argv to the model dir, so tests can check the contract.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

_stop = False


def _on_sigterm(signum, frame):
    global _stop
    _stop = True


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", default="ok")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--checkpoint-dir", default="/opt/ml/checkpoints")
    p.add_argument("--learning-rate", type=float, default=0.1)
    args = p.parse_args()
    signal.signal(signal.SIGTERM, _on_sigterm)
    model_dir = Path(os.environ["SM_MODEL_DIR"])
    model_dir.mkdir(parents=True, exist_ok=True)
    host = os.environ.get("SM_CURRENT_HOST", "?")
    channel = os.environ.get("SM_CHANNEL_TRAIN")
    contract = {"argv": sys.argv[1:], "cwd": os.getcwd(),
                "channel_files": sorted(os.listdir(channel)) if channel and os.path.isdir(channel) else None,
                "env": {k: v for k, v in os.environ.items()
                        if k.startswith(("SM_", "TRAINING_JOB", "AWS_ENDPOINT", "USER_"))}}
    (model_dir / f"contract-{host}.json").write_text(json.dumps(contract))

    if args.mode == "fail":
        print("trainctl step=1 loss=1.0 samples_per_s=10.0", flush=True)
        print("about to fail", file=sys.stderr, flush=True)
        raise RuntimeError("tiny job failed on purpose")
    step = 0
    while args.mode == "sleep" or step < args.steps:
        step += 1
        print(f"trainctl step={step} loss={1.0 / step:.4f} samples_per_s=100.0", flush=True)
        if _stop:
            ckpt = Path(args.checkpoint_dir)
            ckpt.mkdir(parents=True, exist_ok=True)
            (ckpt / f"{host}-step-{step}.txt").write_text(str(step))
            print(f"trainctl checkpointed_on_sigterm step={step}", flush=True)
            return 0
        time.sleep(0.1 if args.mode == "sleep" else 0.01)
    (model_dir / "model.txt").write_text(f"steps={step}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
