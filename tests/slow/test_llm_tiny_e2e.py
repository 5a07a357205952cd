"""Configs/llm-tiny.yaml end to end against the sandbox: launch, watch to Completed with tokens/s,
and the measured throughput in the next plan, on SageMaker and on EC2. Real torchrun runs train_lm.py (FSDP,
gloo on the CPU): on SageMaker in the sandbox's simulated containers, on EC2 through the node agent that the
launch's own user data starts (a fake IMDS gives it the sandbox instance's id and private IP, which is added
to this machine's loopback for the run, as tests/slow/test_bootstrap_netns.py needs root for). Kept short: 24 steps
of a 133k-parameter model. Nothing is timed; the limits only bound a hung job."""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.node_agent_helpers import FakeImds
import pytest

from tests.support.helpers import CONFIGS, run_cli, gpu_stand_in

SPEC = str(CONFIGS / "llm-tiny.yaml")


def _json(sandbox, home: Path, *args: str, timeout: float = 200) -> dict:
    proc = run_cli(["--output", "json", *args], home, env=sandbox.env, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _measured_in_next_plan(sandbox, home: Path, platform: str, layout: str, measured: float) -> None:
    plan = _json(sandbox, home, "plan", SPEC, "--platform", platform, "--layout", layout)
    opt = next(o for o in plan["options"] if o["platform"] == platform)
    assert opt["throughput_source"] == "measured"
    assert opt["throughput_samples_per_s"] == pytest.approx(measured, rel=0.01)


@pytest.mark.timeout(420)
def test_llm_tiny_on_sagemaker_launch_watch_completed_and_measured(sm, tmp_path):
    home = tmp_path / "home"
    out = _json(sm, home, "launch", SPEC, "--platform", "sagemaker", "--yes")
    job = out["job_id"]
    follow = run_cli(["watch", job, "--interval", "0.5"], home, env=sm.env, timeout=380)
    assert follow.returncode == 0, follow.stderr[-3000:]
    assert "tokens_per_s=" in follow.stdout and "sharding=full" in follow.stdout
    assert "final_state_sha256=" in follow.stdout
    doc = _json(sm, home, "watch", job, "--once")
    assert doc["status"] == "Completed" and doc["throughput_samples_per_s"] > 0
    hps = sm.client("sagemaker").describe_training_job(TrainingJobName=job)["HyperParameters"]
    assert {k: hps[k] for k in ("sharding", "batch-size", "grad-accum", "global-batch-size")} == \
        {"sharding": '"full"', "batch-size": "8", "grad-accum": "1", "global-batch-size": "16"}
    _measured_in_next_plan(sm, home, "sagemaker", "g5.xlarge:2:spot", doc["throughput_samples_per_s"])


def _with_address(ip: str):
    """The instance's private IP on the loopback while the node runs (root only), so that the agent finds
    itself among the job's instances and torchrun's rendezvous reaches it."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2 to give this machine the instance's private IP")
    added = subprocess.run(["ip", "addr", "add", f"{ip}/32", "dev", "lo"], capture_output=True, text=True)
    if added.returncode != 0:
        pytest.skip(f"cannot add {ip} to the loopback: {added.stderr.strip()}")
    return lambda: subprocess.run(["ip", "addr", "del", f"{ip}/32", "dev", "lo"], capture_output=True)


def _run_node(sb, tmp_path: Path, user_data: str, instance: dict) -> subprocess.CompletedProcess:
    """The launch's user data on this machine as the node: the real agent, torchrun and train_lm.py."""
    remove = _with_address(instance["PrivateIpAddress"])
    imds = FakeImds(instance["InstanceId"], instance["PrivateIpAddress"])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "shutdown").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "shutdown-called"}\n')
    (bin_dir / "shutdown").chmod(0o755)
    gpu_stand_in(bin_dir, 1)  # g5.xlarge's one A10G, as its image's driver lists it
    script = tmp_path / "user-data.sh"
    script.write_text(user_data)
    # CUDA shows the node's processes no GPU (this machine has none): SM_NUM_GPUS=0, the script runs on the CPU
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "CUDA_VISIBLE_DEVICES": "",
           "TRAINCTL_ROOT": str(tmp_path / "root"), "TRAINCTL_PYTHON": sys.executable,
           "TRAINCTL_IMDS_ENDPOINT": imds.endpoint,
           "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": str(tmp_path / "none"),
           "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_ENDPOINT_URL": sb.endpoint_url,
           "AWS_ACCESS_KEY_ID": sb.env["AWS_ACCESS_KEY_ID"], "AWS_SECRET_ACCESS_KEY": sb.env["AWS_SECRET_ACCESS_KEY"]}
    try:
        return subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=360)
    finally:
        remove()
        imds.close()


@pytest.mark.timeout(480)
def test_llm_tiny_on_ec2_launch_node_agent_completed_and_measured(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    out = _json(sb, home, "launch", SPEC, "--platform", "ec2", "--layout", "g5.xlarge:1:spot", "--yes")
    job, region = out["job_id"], out["region"]
    ec2 = sb.client("ec2", region)
    template = ec2.describe_launch_templates()["LaunchTemplates"][0]["LaunchTemplateId"]
    data = ec2.describe_launch_template_versions(LaunchTemplateId=template)["LaunchTemplateVersions"][0]
    user_data = base64.b64decode(data["LaunchTemplateData"]["UserData"]).decode()
    instance = next(i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]
                    if i["State"]["Name"] in ("pending", "running"))
    node = _run_node(sb, tmp_path, user_data, instance)
    assert node.returncode == 0, (node.stdout + node.stderr)[-3000:]
    doc = _json(sb, home, "watch", job, "--once")
    assert doc["status"] == "Completed" and doc["throughput_samples_per_s"] > 0
    logs = run_cli(["logs", job], home, env=sb.env)
    assert "tokens_per_s=" in logs.stdout and "grad_accum=1" in logs.stdout and "sharding=full" in logs.stdout
    _measured_in_next_plan(sb, home, "ec2", "g5.xlarge:1:spot", doc["throughput_samples_per_s"])
