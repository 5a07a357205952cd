#!/usr/bin/env python3
"""`make demo`: start the local sandbox AWS, plan the reference job against it, stop the sandbox.

Nothing outlives the demo: the sandbox runs under a temporary TRAINCTL_HOME and is stopped (with
everything it started) even when the plan fails or the demo is interrupted.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = "configs/vit-base-g5.yaml"


def main() -> int:
    from trainctl_sandbox import process

    trainctl = [sys.executable, "-m", "trainctl.cli"]
    with tempfile.TemporaryDirectory(prefix="trainctl-demo-") as home:
        directory = Path(home) / "sandbox"
        print("Starting the local sandbox AWS (moto plus Spot placement scores, Spot price history, Pricing, "
              "Service Quotas)...", flush=True)
        state = process.start_detached(port=0, seed=7, directory=directory, parent_pid=os.getpid())
        try:
            env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
            env.update(process.sandbox_env(state["endpoint_url"]), TRAINCTL_HOME=home,
                       AWS_CONFIG_FILE=f"{home}/none", AWS_SHARED_CREDENTIALS_FILE=f"{home}/none")
            print(f"Sandbox at {state['endpoint_url']}. Planning {SPEC} against it:\n", flush=True)
            rc = subprocess.call([*trainctl, "plan", SPEC, "--top", "8"], cwd=ROOT, env=env)
            print(f"\nThe reference comparison, four Spot g5.2xlarge against one On-Demand g5.12xlarge:\n",
                  flush=True)
            rc = rc or subprocess.call([*trainctl, "plan", SPEC, "--layout", "g5.2xlarge:4:spot", "--layout",
                                        "g5.12xlarge:1:on-demand", "--platform", "sagemaker"], cwd=ROOT, env=env)
        finally:
            process.stop(directory)
            print("\nSandbox stopped.")
    return rc


if __name__ == "__main__":
    sys.exit(main())
