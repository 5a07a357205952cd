"""How politely `trainctl watch` polls, and how late it shows a log line.

Starts a private sandbox, launches a 4-host SageMaker job of the bundled DDP entrypoint (vit_micro)
through trainctl's own launch path, and follows it with `trainctl.usecases.jobs.watch.follow` exactly as the CLI
does. A botocore `before-call` hook on the clients watch uses counts every AWS call by operation;
the delay of a line is (the moment watch hands it to the screen) - (the CloudWatch event timestamp,
which the sandbox stamps when the host process wrote the line).

    python scripts/bench_watch.py [--hosts 4] [--steps 300] [--interval 2.0] [--json out.json]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SPEC = """name: bench-watch
entrypoint:
  bundled: ddp
  args: {{model: vit_micro, bf16: false, log-every: 5, steps: {steps}, checkpoint-every: 0}}
model: {{architecture: vit_micro, precision: fp32}}
workload: {{samples: 100000, batch_size_per_accelerator: 8}}
candidates:
  layouts: [g5.xlarge:{hosts}:on-demand]
  nodes: {{min: 1, max: {hosts}}}
  markets: [on-demand]
  platforms: [sagemaker]
  regions: [us-east-1]
"""


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--interval", type=float, default=2.0, help="watch's poll interval (the CLI default is 2 s)")
    ap.add_argument("--time-scale", type=float, default=0.3, help="sandbox's simulated waits")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()

    from trainctl_sandbox.server import process
    from trainctl_sandbox.admin import SandboxAdmin

    tmp = Path(tempfile.mkdtemp(prefix="bench-watch-"))
    os.environ["TRAINCTL_HOME"] = str(tmp / "home")
    st = process.start_detached(port=0, seed=0, directory=tmp / "sandbox", parent_pid=os.getpid())
    try:
        os.environ.update(process.sandbox_env(st["endpoint_url"]))
        SandboxAdmin(st["endpoint_url"]).action("configure_training_jobs", time_scale=a.time_scale)
        from trainctl.aws import clients as aws
        from trainctl.usecases.jobs import watch
        from trainctl.backends import get_backend
        from trainctl.usecases.launch.launch_job import LaunchArgs, launch

        aws.reset_session()
        spec = tmp / "bench-watch.yaml"
        spec.write_text(SPEC.format(steps=a.steps, hosts=a.hosts))
        out = launch(LaunchArgs(spec_path=str(spec), yes=True), say=lambda m: None, show=lambda r: None,
                     confirm=lambda q: True)
        job, region = out["job_id"], out["region"]

        calls: collections.Counter = collections.Counter()

        def count(model, **_):
            calls[model.name] += 1

        for service in ("sagemaker", "logs"):  # the clients watch uses (aws.client caches them)
            aws.client(service, region).meta.events.register("before-call", count)

        delays: list[float] = []
        hosts_seen: set[str] = set()

        def on_line(ln) -> None:
            delays.append(time.time() - ln.timestamp_ms / 1000)
            hosts_seen.add(ln.host)

        t0 = time.time()
        view, progress = watch.follow(get_backend("sagemaker"), job, region, interval=a.interval, on_line=on_line)
        elapsed = time.time() - t0
    finally:
        process.stop(tmp / "sandbox")

    total = sum(calls.values())
    cycles = calls["DescribeTrainingJob"]
    result = {
        "date": time.strftime("%Y-%m-%d", time.gmtime()), "machine": f"{platform.machine()}, {os.cpu_count()} cpus, "
                                                                    f"{platform.python_version()}",
        "hosts": a.hosts, "steps": a.steps, "interval_s": a.interval, "job_status": view.status,
        "followed_s": round(elapsed, 1), "aws_calls": dict(calls), "aws_calls_total": total,
        "calls_per_minute": round(total / (elapsed / 60), 1), "poll_cycles": cycles,
        "calls_per_cycle": round(total / max(1, cycles), 2), "log_lines": len(delays),
        "hosts_in_logs": sorted(hosts_seen),
        "delay_s": {"median": round(statistics.median(delays), 2), "p95": round(percentile(delays, 0.95), 2),
                    "max": round(max(delays), 2)} if delays else None,
        "throughput_samples_per_s": progress.samples_per_s,
    }
    print(json.dumps(result, indent=2))
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0 if view.status == "Completed" else 1


if __name__ == "__main__":
    raise SystemExit(main())
