"""A job's own data end to end in the sandbox (spec `data:`): real training jobs on SageMaker and on EC2 read their
channels (copied from S3, sharded across hosts, or FSx for Lustre), and their model, TensorBoard events and logs
come back with `trainctl fetch`. What the launch checks before anything is created is in
tests/sandbox/data/test_data_channels.py."""
from __future__ import annotations

import json

from tests.support.data_jobs import FILES, cli, dataset, lustre_group, project


def train_and_fetch(sb, home, tmp_path, spec: str, platform: str, *extra: str) -> str:
    launched = cli(sb, home, "-o", "json", "launch", spec, "--platform", platform, "--yes", *extra)
    assert launched.returncode == 0, launched.stderr
    job = json.loads(launched.stdout)["job_id"]
    watched = cli(sb, home, "watch", job, "--interval", "0.3", timeout=240)
    assert watched.returncode == 0, watched.stderr
    assert f"trainctl read_files={FILES} sum={sum(range(FILES))}" in cli(sb, home, "logs", job).stdout
    assert "outputs: model s3://" in watched.stderr
    fetched = cli(sb, home, "fetch", job, "--what", "model", str(tmp_path / "model"))
    assert fetched.returncode == 0, fetched.stderr
    assert (tmp_path / "model" / "model.txt").read_text() == f"files={FILES}\n"
    events = cli(sb, home, "fetch", job, "--what", "tensorboard", str(tmp_path / "tb"))
    assert events.returncode == 0, events.stderr
    assert any(p.name.startswith("events.out.tfevents") for p in (tmp_path / "tb").rglob("*"))
    logs = cli(sb, home, "fetch", job, "--what", "logs", str(tmp_path / "logs"))
    assert logs.returncode == 0, logs.stderr
    assert f"trainctl read_files={FILES}" in (tmp_path / "logs" / f"{job}.log").read_text()
    return job


def test_a_sagemaker_job_reads_its_channel_and_its_model_comes_back_with_fetch(sm, sandbox_env, tmp_path):
    """`train` copied from S3, `extra` from FSx for Lustre (a FileSystemDataSource: SageMaker mounts it, the sandbox
    copies the file system's directory and says so)."""
    dataset(sm)
    subnet = sm.client("ec2").describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])[
        "Subnets"][0]["SubnetId"]
    # its groups let the job's subnet in; the job's own group gets Lustre in from them (the sandbox checks both)
    fs = sm.client("fsx").create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet], SecurityGroupIds=[lustre_group(sm)],
        LustreConfiguration={"DeploymentType": "SCRATCH_1", "ImportPath": "s3://my-datasets"})["FileSystem"]
    spec = project(tmp_path, f"{{train: s3://my-datasets/shards/, extra: {{fsx: {fs['FileSystemId']}, "
                              "path: /fsx/shards}}")
    job = train_and_fetch(sm, tmp_path / "home", tmp_path, spec, "sagemaker", "--subnet", subnet)
    logs = (tmp_path / "logs" / f"{job}.log").read_text()  # fetched by train_and_fetch
    assert "sandbox: channel extra is FSx for Lustre on SageMaker (mounted); the sandbox copied its files" in logs


def test_each_host_of_a_sharded_sagemaker_channel_reads_its_share(sm, sandbox_env, tmp_path):
    dataset(sm)
    home = tmp_path / "home"
    spec = project(tmp_path, "{train: {uri: 's3://my-datasets/shards/', mode: sharded}}")
    launched = cli(sm, home, "-o", "json", "launch", spec, "--platform", "sagemaker", "--layout",
                    "g5.xlarge:2:on-demand", "--yes")
    assert launched.returncode == 0, launched.stderr
    job = json.loads(launched.stdout)["job_id"]
    assert cli(sm, home, "watch", job, "--interval", "0.3", timeout=240).returncode == 0
    counts = [ln for ln in cli(sm, home, "logs", job).stdout.splitlines() if "trainctl read_files=" in ln]
    assert len(counts) == 2 and all(f"read_files={FILES // 2} " in ln for ln in counts), counts


def test_an_ec2_job_reads_its_channel_and_its_model_comes_back_with_fetch(ec2_nodes, tmp_path):
    """`train` on FSx for Lustre (the bucket imported into it, mounted by the agent), `extra` copied from S3."""
    dataset(ec2_nodes)
    subnet = ec2_nodes.client("ec2").describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])[
        "Subnets"][0]["SubnetId"]
    fs = ec2_nodes.client("fsx").create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet], SecurityGroupIds=[lustre_group(ec2_nodes)],
        LustreConfiguration={"DeploymentType": "SCRATCH_1", "ImportPath": "s3://my-datasets"})["FileSystem"]
    spec = project(tmp_path, f"{{train: {{fsx: {fs['FileSystemId']}, path: /fsx/shards}}, "
                              "extra: s3://my-datasets/shards/}")
    job = train_and_fetch(ec2_nodes, tmp_path / "home", tmp_path, spec, "ec2", "--subnet", subnet)
    logs = (tmp_path / "logs" / f"{job}.log").read_text()  # fetched by train_and_fetch
    assert f"channel train: FSx for Lustre {fs['FileSystemId']} /fsx/shards mounted read-only" in logs
    assert f"channel extra: {FILES} of {FILES} objects" in logs
