#!/usr/bin/env python3
"""`make demo`: what trainctl is for, end to end, against the local sandbox AWS.

1. plan the reference job (ViT-B/16 on g5) live against the sandbox, and the reference comparison;
2. launch a small job (vit_micro, 240 steps, one Spot host on SageMaker) that really trains on this CPU;
3. arm a Spot interruption at step 100 (`trainctl sandbox interrupt`) and watch the job resume from its
   checkpoint to Completed, with its Spot savings and dollars;
4. launch the same job as a raw EC2 fleet: the sandbox's instance runs the launch's user data and trainctl's
   node agent here; EC2 reclaims the Spot node after its checkpoint at step 100 (the interruption notice first),
   and `watch --recover` relaunches it in the same AZ, where it resumes from the checkpoint to Completed;
5. plan the small job again: the throughput the jobs measured now ranks the plan.

Nothing outlives the demo: the sandbox runs under a temporary TRAINCTL_HOME and is stopped (with every process
it started) even when a step fails or the demo is interrupted. Once installed it took 2.3 minutes on two CPUs
(the install before it, about four: README, "What it costs").
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = "configs/vit-base-g5.yaml"
SMALL = "configs/vit-micro-sandbox.yaml"
INTERRUPT_AT_STEP = 100
# EC2's reclaim of the demo's Spot node follows its interruption notice after this many seconds (AWS: 120): time
# for the node agent to checkpoint and upload, as it would in EC2's two minutes.
RECLAIM_AFTER_S = 8
# The sandbox simulates SageMaker's waits (instance start, image download, Spot restart) at this fraction of
# their usual length, as the tests do, so the demo stays short.
TIME_SCALE = 0.2


def say(text: str) -> None:
    print(f"\n== {text}", flush=True)


class Demo:
    def __init__(self, home: str, endpoint_url: str) -> None:
        from trainctl_sandbox.server import process

        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(process.sandbox_env(endpoint_url), TRAINCTL_HOME=home,
                   AWS_CONFIG_FILE=f"{home}/none", AWS_SHARED_CREDENTIALS_FILE=f"{home}/none")
        self.env = env

    def trainctl(self, *args: str, capture: bool = False) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "trainctl.cli", *args]
        proc = subprocess.run(command, cwd=ROOT, env=self.env, stdout=subprocess.PIPE if capture else None, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"demo: `trainctl {' '.join(args)}` exited {proc.returncode}")
        return proc

    def run(self) -> None:
        say(f"1/6 Planning the reference job {SPEC} live against the sandbox (Spot placement scores, Spot price "
            "history, Pricing, Service Quotas):")
        self.trainctl("plan", SPEC, "--top", "8")
        say("2/6 The reference comparison, four Spot g5.2xlarge against one On-Demand g5.12xlarge:")
        self.trainctl("plan", SPEC, "--layout", "g5.2xlarge:4:spot", "--layout", "g5.12xlarge:1:on-demand",
                      "--platform", "sagemaker")
        say(f"3/6 Launching a job small enough for this CPU ({SMALL}: vit_micro, 240 steps, one Spot g5.xlarge "
            "on SageMaker); every AWS call is listed before it is made:")
        job = json.loads(self.trainctl("-o", "json", "launch", SMALL, "--platform", "sagemaker", "--yes",
                                       capture=True).stdout)["job_id"]
        say(f"4/6 Arming a Spot interruption at step {INTERRUPT_AT_STEP} (`trainctl sandbox interrupt {job} "
            f"--at-step {INTERRUPT_AT_STEP}`), then watching the job: it checkpoints on the notice, SageMaker "
            "restarts it, it resumes from the checkpoint and completes:")
        self.trainctl("sandbox", "interrupt", job, "--at-step", str(INTERRUPT_AT_STEP))
        self.trainctl("watch", job, "--interval", "0.5")
        self.ec2_job()
        say(f"6/6 Planning {SMALL} again: the throughput the jobs measured now ranks the plan (\"measured\"):")
        self.trainctl("plan", SMALL, "--top", "1", "--explain")  # its why names the measuring job

    def ec2_job(self) -> None:
        say(f"5/6 The same job as a raw EC2 fleet (`launch --platform ec2`): the sandbox's Spot g5.xlarge runs the "
            "launch's user data, and so trainctl's node agent and torchrun, on this machine. When the node logs step "
            f"{INTERRUPT_AT_STEP}, EC2 posts the Spot interruption notice and reclaims the node {RECLAIM_AFTER_S} s "
            f"later (`trainctl sandbox interrupt JOB --at-step {INTERRUPT_AT_STEP} --after-seconds "
            f"{RECLAIM_AFTER_S}`); the agent checkpoints on the notice, and `watch --recover` relaunches the node in "
            "the same AZ, where the job resumes from its checkpoint:")
        job = json.loads(self.trainctl("-o", "json", "launch", SMALL, "--platform", "ec2", "--yes",
                                       capture=True).stdout)["job_id"]
        self.trainctl("sandbox", "interrupt", job, "--at-step", str(INTERRUPT_AT_STEP), "--after-seconds",
                      str(RECLAIM_AFTER_S))
        self.trainctl("watch", job, "--recover", "--interval", "0.5")


def main() -> int:
    from trainctl_sandbox.server import process
    from trainctl_sandbox.admin import SandboxAdmin

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="trainctl-demo-") as home:
        directory = Path(home) / "sandbox"
        say("Starting the local sandbox AWS (moto plus Spot placement scores, Spot price history, Pricing, Service "
            "Quotas, SageMaker jobs that really run):")
        state = process.start_detached(port=0, seed=7, directory=directory, parent_pid=os.getpid())
        try:
            print(f"sandbox at {state['endpoint_url']}; its simulated SageMaker waits at x{TIME_SCALE}", flush=True)
            SandboxAdmin(state["endpoint_url"]).action("configure_training_jobs", time_scale=TIME_SCALE)
            Demo(home, state["endpoint_url"]).run()
        finally:
            process.stop(directory)
            print(f"\nSandbox stopped. The demo took {time.perf_counter() - started:.0f} s.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
