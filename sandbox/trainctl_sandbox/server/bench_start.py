"""Measure how long the sandbox takes to start, as a user starts it, and how long a reset takes.

    python -m trainctl_sandbox.server.bench_start [--runs 5]

Per run, from launching `python -m trainctl_sandbox.cli up --detach --port 0` (a fresh interpreter,
as the shell would): (1) until that command has printed the environment and exited, (2) until the
first S3 call is answered, (3) until the first EC2 call is answered (EC2 warms up in the background).
Then the admin reset. Medians and ranges are printed as a Markdown table.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trainctl_sandbox.server import process
from trainctl_sandbox.admin import SandboxAdmin


def _first_answer(client_call, deadline: float) -> None:
    while True:
        try:
            client_call()
            return
        except Exception:  # noqa: BLE001 - keep asking until it answers or the deadline passes
            if time.perf_counter() > deadline:
                raise
            time.sleep(0.01)


def one_run() -> dict[str, float]:
    import boto3
    from botocore.config import Config

    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "TRAINCTL_HOME": home}
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "trainctl_sandbox.cli", "up", "--detach", "--port", "0"],
                             env=env, capture_output=True, text=True, check=True).stdout
        t_up = time.perf_counter() - t0
        url = dict(line.removeprefix("export ").split("=", 1) for line in out.splitlines())["AWS_ENDPOINT_URL"]
        kw = dict(endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing",
                  aws_secret_access_key="testing", config=Config(retries={"total_max_attempts": 1}))
        s3, ec2 = boto3.client("s3", **kw), boto3.client("ec2", **kw)
        try:
            _first_answer(s3.list_buckets, t0 + 60)
            t_s3 = time.perf_counter() - t0
            _first_answer(ec2.describe_availability_zones, t0 + 60)
            t_ec2 = time.perf_counter() - t0
            admin = SandboxAdmin(url)
            resets = []
            for _ in range(5):
                r0 = time.perf_counter()
                admin.reset()
                resets.append(time.perf_counter() - r0)
        finally:
            process.stop(Path(home) / "sandbox")
    return {"up_returns": t_up, "first_s3": t_s3, "first_ec2": t_ec2, "reset": statistics.median(resets)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    runs = [one_run() for _ in range(args.runs)]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{args.runs} runs, {os.cpu_count()} CPUs, load average {load:.2f}\n")
    print("| from `up --detach` launched until | median s | min s | max s |\n|---|---|---|---|")
    labels = {"up_returns": "`up --detach` has printed the env and exited", "first_s3": "first S3 call answered",
              "first_ec2": "first EC2 call answered (warm-up done)", "reset": "admin reset (median of 5 per run)"}
    for key, label in labels.items():
        values = [r[key] for r in runs]
        print(f"| {label} | {statistics.median(values):.2f} | {min(values):.2f} | {max(values):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
