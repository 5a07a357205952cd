#!/usr/bin/env python3
"""Benchmark the CLI: `trainctl --help` start-up, an offline plan, and plan time as layouts x regions grow.

Usage: python scripts/bench_cli.py [--runs N]. Prints a markdown section for docs/benchmarks.md.
Targets: `trainctl --help` under 150 ms on the 2-core development machine.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def trainctl_exe() -> list[str]:
    exe = Path(sys.executable).with_name("trainctl")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "trainctl.cli"]


def wall(cmd: list[str], runs: int, env: dict) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return times


def planner_scaling() -> list[tuple[int, int, int, float]]:
    """(layouts considered, regions, options out, median seconds of plan()) for growing candidate sets."""
    from trainctl.catalog import load_catalog
    from trainctl.planner import plan
    from trainctl.planner.quotes import Quotes
    from trainctl.spec import JobSpec, load_spec

    cat = load_catalog()
    base = load_spec(ROOT / "configs/vit-base-g5.yaml").model_dump()
    rows = []
    for families, max_nodes in ((["g5"], 2), (["g5"], 8), (["g5", "g6"], 8), (["g5", "g6", "p4d", "p5"], 16),
                                (["g5", "g6", "p3", "p3dn", "p4d", "p5"], 32)):
        for regions in (["us-east-1"], ["us-east-1", "us-west-2"], ["us-east-1", "us-east-2", "us-west-2"]):
            data = dict(base)
            data["model"] = {**base["model"], "precision": "fp16"}
            data["constraints"] = {**base["constraints"], "deadline_hours": None}
            data["candidates"] = {**base["candidates"], "families": families, "layouts": [],
                                  "nodes": {"min": 1, "max": max_nodes}, "regions": regions}
            spec = JobSpec.model_validate(data)
            quotes = Quotes.offline(regions)
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                result = plan(spec, cat, quotes)
                times.append(time.perf_counter() - t0)
            layouts = sum(1 for i in cat.instances.values() if i.family in families) * max_nodes
            rows.append((layouts, len(regions), len(result.options), statistics.median(times)))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(TRAINCTL_HOME=home, AWS_CONFIG_FILE=f"{home}/none", AWS_SHARED_CREDENTIALS_FILE=f"{home}/none",
                   AWS_EC2_METADATA_DISABLED="true")
        exe = trainctl_exe()
        wall(exe + ["--help"], 2, env)  # warm the page cache and .pyc files
        help_t = wall(exe + ["--help"], args.runs, env)
        plan_t = wall(exe + ["--output", "json", "plan", "configs/vit-base-g5.yaml", "--offline"], args.runs, env)
        bare_t = wall([sys.executable, "-c", "pass"], args.runs, env)
    cpu = platform.processor() or platform.machine()
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        model = cpu
    print(f"## CLI\n\nMeasured {date.today()} on {os.cpu_count()} cores ({model}), Python "
          f"{platform.python_version()}, median of {args.runs} runs, wall time of the whole process.\n")
    print("| command | median | min | max |\n|---|---|---|---|")
    for name, t in (("`python -c pass` (interpreter floor)", bare_t), ("`trainctl --help` (target < 150 ms)", help_t),
                    ("`trainctl --output json plan configs/vit-base-g5.yaml --offline`", plan_t)):
        print(f"| {name} | {statistics.median(t) * 1000:.0f} ms | {min(t) * 1000:.0f} ms | {max(t) * 1000:.0f} ms |")
    print("\nPlanner core alone (`planner.plan`, in-process, offline quotes, median of 5):\n")
    print("| candidate layouts | regions | options out | plan() |\n|---|---|---|---|")
    for layouts, regions, n_opts, t in planner_scaling():
        print(f"| {layouts} | {regions} | {n_opts} | {t * 1000:.1f} ms |")


if __name__ == "__main__":
    main()
