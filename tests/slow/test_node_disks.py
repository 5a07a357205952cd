"""Disks with sizes, as AWS's are.

EC2: a node whose data does not fit its disk fails as a full disk does on AWS: the write gets ENOSPC, the agent
reports the failure in one line, the node shuts itself down and nothing bills. The sandbox's node disk is its root
volume's free part (trainctl_sandbox/ec2/node_disks.py), at the sandbox's disk scale: 1 GiB of volume is 1 MiB
here, so trainctl's 200 GiB root (the image's ~80 GiB filled) leaves the node 120 MiB, and the script below writes
a 200 MiB checkpoint, more than the job's plan (vit_micro: a few MB). Before, the node wrote to an unlimited
folder and the job "completed". Through the CLI, the node agent really running.

SageMaker: a host's File-mode channels go to its storage (ml.g5.xlarge: 250 GB of NVMe instance storage, here at
1 GB = 1 KiB); data over it fails the job in Downloading with SageMaker's own reason, whatever trainctl planned
(trainctl_sandbox/sagemaker/volumes.py). Before, the sandbox copied any amount and the job completed."""
from __future__ import annotations

import json

import pytest

from tests.support.data_jobs import cli, dataset, project
from tests.support.ec2_jobs import live
from tests.support.helpers import run_cli
from trainctl_sandbox.ec2 import node_disks

REGION = "us-east-1"
MIB = 1024 ** 2
# a node's disk is a tmpfs: as root (the machines and CI that run the sandbox are), like the private /opt/ml
sized = pytest.mark.skipif(node_disks.unavailable() is not None, reason=f"no sized disks: {node_disks.unavailable()}")
BIG_CHECKPOINT = '''
import os
path = os.path.join(os.environ.get("SM_MODEL_DIR", "/opt/ml/model"), "huge.pt")
with open(path, "wb") as f:
    for _ in range(200):   # 200 MiB, one MiB at a time: ENOSPC on a 120 MiB disk
        f.write(b"\\0" * (1024 * 1024))
print("trainctl step=1 loss=1.0 samples_per_s=5.0", flush=True)
'''


@sized
def test_a_node_that_writes_more_than_its_disk_holds_fails_and_shuts_down(ec2_nodes, tmp_path):
    sb, home = ec2_nodes, tmp_path / "home"
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(BIG_CHECKPOINT)
    spec = project / "job.yaml"
    spec.write_text(f"""\
name: disk-full
entrypoint: {{script: train.py, source_dir: .}}
model: {{architecture: vit_micro, precision: fp32}}
workload: {{samples: 160, batch_size_per_accelerator: 8}}
candidates: {{layouts: ['g5.xlarge:1:on-demand'], platforms: [ec2], regions: [{REGION}]}}
""")
    sb.admin.action("configure_instances", disk_gib_bytes=MIB)
    try:
        launch = run_cli(["--output", "json", "--region", REGION, "launch", str(spec), "--yes"], home, env=sb.env)
        assert launch.returncode == 0, launch.stderr
        job = json.loads(launch.stdout)["job_id"]
        watched = run_cli(["--output", "json", "--region", REGION, "watch", job, "--no-logs", "--interval", "0.5"],
                          home, env=sb.env, timeout=300)
    finally:
        sb.admin.action("configure_instances", disk_gib_bytes=1024 ** 3)
    assert watched.returncode != 0, watched.stdout
    doc = json.loads(watched.stdout)
    assert doc["status"] == "Failed", doc
    assert "No space left on device" in doc["failure_reason"], doc["failure_reason"]
    assert doc["failure_reason"].startswith("AlgorithmError: the script exited 1 on i-"), doc["failure_reason"]
    assert live(sb, job) == []   # the node shut itself down: nothing bills


def test_sagemaker_data_over_a_host_s_storage_fails_the_job_as_sagemaker_does(sm, sandbox_env, tmp_path):
    dataset(sm)
    sm.client("s3").put_object(Bucket="my-datasets", Key="shards/part-999.txt", Body=b"0" + b" " * MIB)  # 1 MiB
    spec = project(tmp_path, "{train: s3://my-datasets/shards/}")
    home = tmp_path / "home"
    before = sm.admin.action("configure_training_jobs")["disk_gb_bytes"]
    sm.admin.action("configure_training_jobs", disk_gb_bytes=1024)   # 250 GB of NVMe: 250 KiB here
    try:
        launched = cli(sm, home, "-o", "json", "launch", spec, "--platform", "sagemaker", "--yes")
        assert launched.returncode == 0, launched.stderr
        job = json.loads(launched.stdout)["job_id"]
        watched = cli(sm, home, "-o", "json", "watch", job, "--no-logs", "--interval", "0.3", timeout=240)
    finally:
        sm.admin.action("configure_training_jobs", disk_gb_bytes=before)
    assert watched.returncode != 0, watched.stdout
    doc = json.loads(watched.stdout)
    assert doc["status"] == "Failed", doc
    assert doc["failure_reason"] == "ClientError: Data download failed:Insufficient disk space", doc


@sized
def test_an_ec2_node_whose_copied_channel_does_not_fit_fails_in_one_line_and_shuts_down(ec2_nodes, tmp_path):
    """The agent's own copy (a `copy` channel into /opt/ml/input/data) hits the full disk: one line naming the object
    and what to do, no node left. At 1 GiB = 64 KiB the node has 7.5 MiB; the channel holds 10 MiB (the launch sized
    the disk from it, as for data that grew after the launch). Before: the node copied it into an unlimited folder."""
    sb, home = ec2_nodes, tmp_path / "home"
    dataset(sb)
    sb.client("s3").put_object(Bucket="my-datasets", Key="shards/part-999.txt", Body=b"0" + b" " * (10 * MIB))
    spec = project(tmp_path, "{train: s3://my-datasets/shards/}")
    sb.admin.action("configure_instances", disk_gib_bytes=64 * 1024)
    try:
        launched = cli(sb, home, "-o", "json", "launch", spec, "--platform", "ec2", "--yes")
        assert launched.returncode == 0, launched.stderr
        job = json.loads(launched.stdout)["job_id"]
        watched = cli(sb, home, "-o", "json", "watch", job, "--no-logs", "--interval", "0.5", timeout=300)
    finally:
        sb.admin.action("configure_instances", disk_gib_bytes=1024 ** 3)
    doc = json.loads(watched.stdout)
    assert watched.returncode != 0 and doc["status"] == "Failed", doc
    reason = doc["failure_reason"]
    assert "s3://my-datasets/shards/part-999.txt does not fit this node's disk at" in reason, reason
    assert "No space left on device" in reason and len(reason.strip().splitlines()) == 1, reason
    assert live(sb, job) == []
