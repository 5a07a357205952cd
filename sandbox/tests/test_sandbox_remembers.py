"""A sandbox stopped and started again is the same account (issue 35), as a user meets it through `trainctl sandbox
up --detach` / `down`: the buckets and their objects, IAM (the boundary's new default version) and the training
jobs are still there, a job that ran when the sandbox stopped is kept as Failed with the reason (never forgotten),
`up` on the port just freed works at once, and `up --fresh` starts a new account."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import boto3

from trainctl_sandbox.server import process

BOUNDARY = "arn:aws:iam::123456789012:policy/trainctl-boundary"
JOB = {"TrainingJobName": "kept-job", "RoleArn": "arn:aws:iam::123456789012:role/trainctl-sagemaker-execution",
       "AlgorithmSpecification": {"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/x:1",
                                  "TrainingInputMode": "File"},
       "OutputDataConfig": {"S3OutputPath": "s3://my-datasets/out"},
       "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
       "StoppingCondition": {"MaxRuntimeInSeconds": 600}}


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run([sys.executable, "-m", "trainctl.cli", "sandbox", *args],
                          env={**env, "TRAINCTL_HOME": str(home)}, capture_output=True, text=True, timeout=120)


def _user_env(home: Path, endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**env, **process.sandbox_env(endpoint), "TRAINCTL_HOME": str(home),
            "AWS_CONFIG_FILE": str(home / "no-aws-config"), "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-creds")}


def _record(home: Path, endpoint: str, job_id: str) -> None:
    """The job as trainctl's store holds a job it launched (its own launch is not what this test is about)."""
    from trainctl.plans import Option
    from trainctl.state.job_store import JobStore

    option = Option(rank=1, platform="sagemaker", instance_type="g5.xlarge", count=1, market="on-demand",
                    region="us-east-1", accelerators=1, hourly_usd=1.4, throughput_samples_per_s=10,
                    throughput_source="model", hours=1.0, expected_cost_usd=1.4)
    home.mkdir(parents=True, exist_ok=True)
    with JobStore(home / "state.db", endpoint=endpoint) as store:
        store.record_job(job_id=job_id, account="123456789012", platform="sagemaker", region="us-east-1",
                         spec_path="job.yaml", spec_name="kept", model="m", batch_size=8, option=option,
                         plan_json=None, status="InProgress")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((process.HOST, 0))
        return s.getsockname()[1]


def _client(service: str, endpoint: str):
    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def test_a_restarted_sandbox_keeps_its_account_and_up_fresh_starts_a_new_one(tmp_path):
    port = _free_port()
    endpoint = f"http://{process.HOST}:{port}"
    try:
        first = _cli("up", "--detach", "--port", str(port), home=tmp_path)
        assert first.returncode == 0 and "a new account" in first.stderr, first.stderr
        s3, iam = _client("s3", endpoint), _client("iam", endpoint)
        s3.create_bucket(Bucket="my-datasets")
        s3.put_object(Bucket="my-datasets", Key="shards/part-000.txt", Body=b"kept")
        version = iam.create_policy_version(PolicyArn=BOUNDARY, PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject",
                                                     "Resource": "arn:aws:s3:::my-datasets/*"}]}),
            SetAsDefault=True)["PolicyVersion"]["VersionId"]
        _client("sagemaker", endpoint).create_training_job(**JOB)
        assert _cli("down", home=tmp_path).returncode == 0

        # the same port, at once (its connections are still in TIME_WAIT)
        again = _cli("up", "--detach", "--port", str(port), home=tmp_path)
        assert again.returncode == 0, again.stderr
        assert "the account the last sandbox kept" in again.stderr and "--fresh" in again.stderr, again.stderr
        s3, iam, sm = _client("s3", endpoint), _client("iam", endpoint), _client("sagemaker", endpoint)
        assert s3.get_object(Bucket="my-datasets", Key="shards/part-000.txt")["Body"].read() == b"kept"
        assert iam.get_policy(PolicyArn=BOUNDARY)["Policy"]["DefaultVersionId"] == version
        job = sm.describe_training_job(TrainingJobName="kept-job")
        assert job["TrainingJobStatus"] in ("Completed", "Failed", "Stopped"), job["TrainingJobStatus"]
        if job["TrainingJobStatus"] == "Failed":
            assert job["FailureReason"], job
        listed = sm.list_training_jobs()["TrainingJobSummaries"]
        assert [j["TrainingJobName"] for j in listed] == ["kept-job"]
        # `ls` shows the status the account kept, not one guessed because the sandbox forgot the job
        _record(tmp_path / "user", endpoint, "kept-job")
        ls = subprocess.run([sys.executable, "-m", "trainctl.cli", "-o", "json", "ls"], capture_output=True, text=True,
                            env=_user_env(tmp_path / "user", endpoint), timeout=120)
        assert ls.returncode == 0, ls.stderr
        assert [(j["job_id"], j["status"]) for j in json.loads(ls.stdout)["jobs"]] == [
            ("kept-job", job["TrainingJobStatus"])]
        assert _cli("down", home=tmp_path).returncode == 0

        fresh = _cli("up", "--detach", "--port", str(port), "--fresh", home=tmp_path)
        assert fresh.returncode == 0 and "a new account" in fresh.stderr, fresh.stderr
        names = [b["Name"] for b in _client("s3", endpoint).list_buckets()["Buckets"]]
        assert "my-datasets" not in names and names, names
        assert _client("sagemaker", endpoint).list_training_jobs()["TrainingJobSummaries"] == []
    finally:
        _cli("down", home=tmp_path)
