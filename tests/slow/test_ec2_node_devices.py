"""A node that lacks the accelerator the plan paid for fails in seconds, with the reason, and never trains on the
CPU (bootstrap/accelerator_check.py). The sandbox's node booted from an image that cannot drive its GPU sees none,
as on AWS: its `nvidia-smi` fails as the driver's does (trainctl_sandbox/ec2/machines.py). Before the check, the
agent ran the bundled script, which fell back to the CPU and "completed". Through the CLI, nodes really running."""
from __future__ import annotations

import json

from tests.support.helpers import run_cli
from trainctl_sandbox.server.seed import ami_id

REGION = "us-east-1"
SPEC = """\
name: no-gpu
entrypoint: {bundled: ddp, args: {model: vit_micro, batch-size: 8, steps: 10, log-every: 5}}
model: {architecture: vit_micro}
workload: {samples: 80, batch_size_per_accelerator: 8}
"""


def test_a_node_whose_image_cannot_drive_its_gpu_fails_at_once_and_says_why(ec2_nodes, tmp_path):
    sb, home = ec2_nodes, tmp_path / "home"
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC)
    # The Base Proprietary Nvidia Driver AMI (Amazon Linux 2) 73.1 lists G3, P4d, Inf1: not G5
    ami = ami_id(REGION, "gpu-base-proprietary-al2")
    proc = run_cli(["--output", "json", "--region", REGION, "launch", str(spec), "--platform", "ec2", "--layout",
                    "g5.xlarge:1:on-demand", "--ami", ami, "--yes"], home, env=sb.env)
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)["job_id"]
    watched = run_cli(["--output", "json", "watch", job, "--interval", "0.5"], home, env=sb.env, timeout=300)
    doc = json.loads(watched.stdout)
    assert doc["status"] == "Failed", doc
    logs = run_cli(["logs", job], home, env=sb.env).stdout
    assert "this node sees 0 of the 1 GPUs g5.xlarge has" in logs and "couldn't communicate with the NVIDIA driver" \
        in logs, logs
    assert "trainctl step=" not in logs   # the script never started, on the CPU or anywhere


def test_a_script_given_a_gpu_that_torch_cannot_see_stops_instead_of_training_on_the_cpu(ec2_nodes, tmp_path):
    """A node whose image drives its GPU, but whose CUDA shows the training none (here: CUDA shows every GPU of
    the type, as on AWS, on a host that has none). The agent tells the script SM_NUM_GPUS=1, as SageMaker's
    toolkit would; the bundled script stops in one line where it used to fall back to the CPU and complete."""
    sb, home = ec2_nodes, tmp_path / "home"
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC)
    sb.admin.action("configure_instances", cuda="all")
    try:
        proc = run_cli(["--output", "json", "--region", REGION, "launch", str(spec), "--platform", "ec2", "--layout",
                        "g5.xlarge:1:on-demand", "--yes"], home, env=sb.env)
        assert proc.returncode == 0, proc.stderr
        job = json.loads(proc.stdout)["job_id"]
        watched = run_cli(["--output", "json", "watch", job, "--interval", "0.5"], home, env=sb.env, timeout=300)
    finally:
        sb.admin.action("configure_instances", cuda="host")
    doc = json.loads(watched.stdout)
    assert doc["status"] == "Failed", doc
    logs = run_cli(["logs", job], home, env=sb.env).stdout
    assert "1 GPUs present, as g5.xlarge has (SM_NUM_GPUS=1)" in logs, logs
    assert "this node was launched with 1 GPU(s) (SM_NUM_GPUS=1) but torch" in logs, logs
    assert "trainctl step=" not in logs
