"""Input channels of sandbox SageMaker jobs, through boto3 over HTTP: a bucket in another region than the job
fails its download as SageMaker's does, ShardedByS3Key gives each host its share of the objects, and a FastFile
channel is copied with a line in the job's log that says so."""
from __future__ import annotations

import io
import json
import tarfile
import time
import urllib.request
from pathlib import Path

import pytest

JOBS = Path(__file__).parent / "sandbox_jobs"
ROLE = "arn:aws:iam::123456789012:role/trainctl-sagemaker-execution"  # seeded: SageMaker may assume it
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-cpu-py311"
BUCKET = "trainctl-sandbox-channels"
GROUP = "/aws/sagemaker/TrainingJobs"


@pytest.fixture
def sb(sandbox):
    before = sandbox.admin.action("configure_training_jobs")
    sandbox.admin.action("configure_training_jobs", time_scale=0.3)
    sandbox.client("s3").create_bucket(Bucket=BUCKET)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(JOBS / "tiny" / "job.py", arcname="job.py")
    sandbox.client("s3").put_object(Bucket=BUCKET, Key="code/sourcedir.tar.gz", Body=buf.getvalue())
    for i in range(6):
        sandbox.client("s3").put_object(Bucket=BUCKET, Key=f"data/part-{i}.txt", Body=str(i).encode())
    yield sandbox
    sandbox.admin.action("configure_training_jobs", time_scale=before["time_scale"])


def _request(name: str, channel: dict, hosts: int = 1) -> dict:
    return dict(TrainingJobName=name, RoleArn=ROLE,
                HyperParameters={"sagemaker_program": json.dumps("job.py"),
                                 "sagemaker_submit_directory": json.dumps(f"s3://{BUCKET}/code/sourcedir.tar.gz")},
                AlgorithmSpecification={"TrainingImage": IMAGE, "TrainingInputMode": "File"},
                InputDataConfig=[{"ChannelName": "train", **channel}],
                OutputDataConfig={"S3OutputPath": f"s3://{BUCKET}/output"},
                ResourceConfig={"InstanceType": "ml.g5.xlarge", "InstanceCount": hosts, "VolumeSizeInGB": 30},
                StoppingCondition={"MaxRuntimeInSeconds": 600})


def _ended(sm, name: str) -> dict:
    while True:
        d = sm.describe_training_job(TrainingJobName=name)
        if d["TrainingJobStatus"] in ("Completed", "Failed", "Stopped"):
            return d
        time.sleep(0.2)


def _info(sandbox, name: str) -> dict:
    req = urllib.request.Request(f"{sandbox.endpoint_url}/_trainctl/admin/training_job_sandbox_info", method="POST",
                                 data=json.dumps({"name": name}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def _s3(uri: str, distribution: str = "FullyReplicated") -> dict:
    return {"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri,
                                            "S3DataDistributionType": distribution}}}


@pytest.mark.timeout(120)
def test_a_channel_in_another_region_fails_the_download(sb):
    west = sb.client("s3", "us-west-2")
    west.create_bucket(Bucket="far-channel", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    west.put_object(Bucket="far-channel", Key="data/x.txt", Body=b"1")
    sm = sb.client("sagemaker")
    sm.create_training_job(**_request("far-data", _s3("s3://far-channel/data/")))
    d = _ended(sm, "far-data")
    assert d["TrainingJobStatus"] == "Failed"
    assert d["FailureReason"].startswith("ClientError: Data download failed")
    assert "us-west-2" in d["FailureReason"] and "far-channel" in d["FailureReason"]


@pytest.mark.timeout(120)
def test_sharded_by_s3_key_gives_each_host_its_share(sb):
    sm = sb.client("sagemaker")
    sm.create_training_job(**_request("sharded", _s3(f"s3://{BUCKET}/data/", "ShardedByS3Key"), hosts=2))
    assert _ended(sm, "sharded")["TrainingJobStatus"] == "Completed"
    shares = [{p.name for p in (Path(h) / "input" / "data" / "train").iterdir()} for h in _info(sb, "sharded")["hosts"]]
    assert len(shares) == 2 and not shares[0] & shares[1]
    assert shares[0] | shares[1] == {f"part-{i}.txt" for i in range(6)} and len(shares[0]) == 3


@pytest.mark.timeout(120)
def test_a_fastfile_channel_is_copied_and_the_log_says_so(sb):
    sm, logs = sb.client("sagemaker"), sb.client("logs")
    sm.create_training_job(**_request("fastfile", {"InputMode": "FastFile", **_s3(f"s3://{BUCKET}/data/")}))
    assert _ended(sm, "fastfile")["TrainingJobStatus"] == "Completed"
    (host,) = _info(sb, "fastfile")["hosts"]
    assert len(list((Path(host) / "input" / "data" / "train").iterdir())) == 6
    stream = next(s["logStreamName"] for s in logs.describe_log_streams(logGroupName=GROUP)["logStreams"]
                  if s["logStreamName"].startswith("fastfile/"))
    lines = [e["message"] for e in logs.get_log_events(logGroupName=GROUP, logStreamName=stream)["events"]]
    assert any("FastFile" in ln and "copied" in ln for ln in lines), lines


def test_describing_an_fsx_file_system_that_does_not_exist_is_file_system_not_found(sandbox):
    from botocore.exceptions import ClientError

    fsx = sandbox.client("fsx")
    with pytest.raises(ClientError) as err:
        fsx.describe_file_systems(FileSystemIds=["fs-0123456789abcdef0"])
    assert err.value.response["Error"]["Code"] == "FileSystemNotFound"
    assert fsx.describe_file_systems()["FileSystems"] == []  # listing all is not an error
