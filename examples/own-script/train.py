"""A training script of your own, as trainctl runs it on SageMaker and on EC2 (docs/your-script.md).

It fits y = 3x + 2 by SGD in plain Python so that it runs anywhere in seconds; put your model where
`train_step` is. What matters is the contract around it:
- arguments: exactly the spec's `entrypoint.args`, as `--name value`; nothing is appended;
- checkpoints: /opt/ml/checkpoints, SageMaker's path, which SageMaker and trainctl's EC2 nodes sync to S3
  and restore before a restart (`--checkpoint-dir` changes it, e.g. for a local run);
- resume: load the checkpoint from that folder; write it through a temporary file and a rename;
- SIGTERM (the Spot notice, `trainctl stop`): checkpoint at the next step and exit 0;
- one metric line per few steps: `trainctl step=N loss=X samples_per_s=Y total_steps=M`;
- the model: written to $SM_MODEL_DIR (/opt/ml/model), which `trainctl fetch JOB --what model` brings back.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time

SAGEMAKER_CHECKPOINTS = "/opt/ml/checkpoints"  # CheckpointConfig.LocalPath, synced to S3 by SageMaker


def parse_args() -> argparse.Namespace:
    in_job = "SM_MODEL_DIR" in os.environ  # SageMaker's variables: a job on SageMaker or on an EC2 node
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300, help="optimizer steps of the whole run")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--checkpoint-every", type=int, default=50)
    p.add_argument("--step-seconds", type=float, default=0.0, help="stands in for a real model's step time")
    p.add_argument("--checkpoint-dir", default=SAGEMAKER_CHECKPOINTS if in_job else "checkpoints")
    p.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "model"))
    return p.parse_args()


class Stop:
    """SIGTERM sets a flag; the loop checkpoints at the next step boundary and exits 0."""

    def __init__(self) -> None:
        self.requested = False
        signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum, frame) -> None:
        self.requested = True


def load_checkpoint(folder: str) -> dict | None:
    path = os.path.join(folder, "state.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def save_checkpoint(folder: str, state: dict) -> None:
    """Write to a temporary file, then rename: a checkpoint is either complete or absent."""
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, "state.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(folder, "state.json"))


def train_step(state: dict, batch_size: int, lr: float, rng: random.Random) -> float:
    xs = [rng.uniform(-1, 1) for _ in range(batch_size)]
    errors = [state["w"] * x + state["b"] - (3 * x + 2) for x in xs]
    state["w"] -= lr * 2 * sum(e * x for e, x in zip(errors, xs)) / batch_size
    state["b"] -= lr * 2 * sum(errors) / batch_size
    return sum(e * e for e in errors) / batch_size


def main() -> int:
    args = parse_args()
    stop = Stop()
    state = load_checkpoint(args.checkpoint_dir) or {"step": 0, "w": 0.0, "b": 0.0}
    if state["step"]:
        print(f"resumed from step {state['step']} in {args.checkpoint_dir}", flush=True)
    window_start, window_samples = time.perf_counter(), 0
    while state["step"] < args.steps:
        rng = random.Random(state["step"])  # the data of a step does not depend on restarts
        loss = train_step(state, args.batch_size, args.lr, rng)
        time.sleep(args.step_seconds)
        state["step"] += 1
        window_samples += args.batch_size
        if state["step"] % args.log_every == 0 or state["step"] == args.steps:
            rate = window_samples / max(time.perf_counter() - window_start, 1e-9)
            print(f"trainctl step={state['step']} loss={loss:.6f} samples_per_s={rate:.1f} "
                  f"total_steps={args.steps}", flush=True)
            window_start, window_samples = time.perf_counter(), 0
        if stop.requested:
            save_checkpoint(args.checkpoint_dir, state)
            print(f"SIGTERM: checkpointed step {state['step']}; exiting for the restart", flush=True)
            return 0
        if state["step"] % args.checkpoint_every == 0:
            save_checkpoint(args.checkpoint_dir, state)
    save_checkpoint(args.checkpoint_dir, state)
    os.makedirs(args.model_dir, exist_ok=True)
    with open(os.path.join(args.model_dir, "model.json"), "w", encoding="utf-8") as f:
        json.dump({"w": state["w"], "b": state["b"], "steps": state["step"]}, f)
    print(f"done: w={state['w']:.3f} b={state['b']:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
