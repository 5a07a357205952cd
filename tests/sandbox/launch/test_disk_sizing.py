"""Disks sized from the job (planner/disk.py): each node holds its copied channels, the last K checkpoints and the
model. SageMaker types with NVMe instance storage use it at its fixed size (botocore ResourceConfig.VolumeSizeInGB),
so a copy that does not fit is refused in one line before anything is created, in `plan`, `launch` and `doctor`;
EC2's root volume grows to hold it. Before, SageMaker asked 50 GB and EC2 200 GiB whatever the data, and a
400 GB copy on ml.g5.xlarge (250 GB) dry-ran with exit 0. Through the CLI and the sandbox."""
from __future__ import annotations

import json

from tests.support.data_jobs import dataset as _dataset, project as _project
from tests.support.helpers import run_cli

BIG = "{train: {uri: 's3://my-datasets/shards/', size_gb: 400}}"   # the copy each node makes: 400 GB


def test_a_copy_that_cannot_fit_is_refused_and_one_that_can_sizes_the_volume(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    _dataset(sb)
    spec = _project(tmp_path, BIG)
    refused = run_cli(["launch", spec, "--platform", "sagemaker", "--dry-run"], home, env=sb.env)
    assert refused.returncode != 0, refused.stdout
    assert "250 GB of NVMe instance storage" in refused.stderr and "GB of disk per node" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) <= 2, refused.stderr
    ec2 = run_cli(["-o", "json", "launch", spec, "--platform", "ec2", "--dry-run"], home, env=sb.env)
    assert ec2.returncode == 0, ec2.stderr
    (template,) = [r["params"] for r in json.loads(ec2.stdout)["requests"] if r["operation"] == "CreateLaunchTemplate"]
    (root,) = template["LaunchTemplateData"]["BlockDeviceMappings"]
    assert root["Ebs"]["VolumeSize"] >= 100 + 400 * 1e9 / 2 ** 30, root   # the image and the copy
    doctor = run_cli(["-o", "json", "doctor", spec, "--platform", "sagemaker"], home, env=sb.env)
    disk = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "disk")
    assert disk["status"] == "fail" and "250 GB of NVMe instance storage" in disk["detail"], disk
    assert sb.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []
