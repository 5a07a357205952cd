"""Shared helpers for trainctl's tests (no fixtures here: those live in conftest.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"

# Variables that would point a test at a real AWS account or a user's setup.
AWS_VARS = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
            "AWS_ENDPOINT_URL", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_DEFAULT_REGION", "AWS_REGION")


def clean_env(home: Path, extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in AWS_VARS}
    env["TRAINCTL_HOME"] = str(home)
    # No credentials anywhere: point the shared files at nothing.
    env["AWS_CONFIG_FILE"] = str(home / "no-aws-config")
    env["AWS_SHARED_CREDENTIALS_FILE"] = str(home / "no-aws-credentials")
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    env.update(extra or {})
    return env


def run_cli(args: list[str], home: Path, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the trainctl console script the way a user does, in a subprocess."""
    return subprocess.run([sys.executable, "-m", "trainctl.cli", *args], cwd=ROOT, env=clean_env(home, env),
                          capture_output=True, text=True, timeout=timeout)


def run_json(args: list[str], home: Path, env: dict | None = None) -> dict:
    proc = run_cli(["--output", "json", *args], home, env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def fuzz_examples(n: int) -> int:
    """A hypothesis test's number of examples: its own under `make test` (the "ci" profile of conftest.py,
    derandomized), 20 times as many under `make fuzz-wide` (TRAINCTL_FUZZ=wide, random)."""
    return n * 20 if os.environ.get("TRAINCTL_FUZZ") == "wide" else n


def gpu_stand_in(bin_dir: Path, count: int, name: str = "NVIDIA A10G") -> Path:
    """A node's `nvidia-smi` for tests that run an EC2 node's user data by hand (outside the sandbox's instances,
    which get theirs from trainctl_sandbox/ec2/machines.py): `-L` lists `count` GPUs as the driver does, so the
    node agent's accelerator check (bootstrap/accelerator_check.py) finds what the type has. On this GPU-less
    machine the node's environment also needs CUDA_VISIBLE_DEVICES="" (CUDA shows its processes no GPU), or the
    agent tells the training SM_NUM_GPUS=count and the bundled scripts stop, torch seeing none."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    lines = "".join(f"echo 'GPU {i}: {name} (UUID: GPU-test-{i})'\n" for i in range(count))
    smi.write_text("#!/bin/sh\n" + lines)
    smi.chmod(0o755)
    return bin_dir
