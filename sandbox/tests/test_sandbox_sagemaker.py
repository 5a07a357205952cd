"""SageMaker training jobs in the sandbox, end to end through boto3 over HTTP.

The shared session sandbox (trainctl_sandbox/testing.py: the real server in a subprocess, reset before each
test) runs the jobs; admin actions go through its admin endpoint. Waits poll DescribeTrainingJob
until the job ends; pytest-timeout bounds them, and no assertion depends on how long anything took.
"""
from __future__ import annotations

import io
import json
import re
import tarfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import psutil
import pytest
from botocore.exceptions import ClientError

JOBS = Path(__file__).parent / "sandbox_jobs"
ROLE = "arn:aws:iam::123456789012:role/trainctl-sagemaker-execution"  # seeded: SageMaker must be able to assume it
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-cpu-py311"
BUCKET = "trainctl-sandbox-tests"
TERMINAL = ("Completed", "Failed", "Stopped")
GROUP = "/aws/sagemaker/TrainingJobs"


@dataclass
class Sandbox:
    shared: Any  # trainctl_sandbox.testing.Sandbox
    sm: Any
    s3: Any
    logs: Any
    ec2: Any

    @property
    def endpoint_url(self) -> str:
        return self.shared.endpoint_url

    def admin(self, action: str, payload: dict) -> dict:
        # POST /_trainctl/admin/<action> with the JSON payload as given: SandboxAdmin.action(name,
        # **payload) cannot carry the payload key "name" that these actions take
        req = urllib.request.Request(f"{self.endpoint_url}/_trainctl/admin/{action}", method="POST",
                                     data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())


@pytest.fixture
def sb(sandbox):
    """The shared sandbox with SageMaker's simulated waits x0.3 (Starting 0.6 s, Restarting 1.2 s,
    SIGTERM grace 9 s) and a bucket for code, checkpoints and output."""
    before = sandbox.admin.action("configure_training_jobs")
    sandbox.admin.action("configure_training_jobs", time_scale=0.3)
    s = Sandbox(sandbox, sandbox.client("sagemaker"), sandbox.client("s3"), sandbox.client("logs"),
                sandbox.client("ec2"))
    s.s3.create_bucket(Bucket=BUCKET)
    yield s
    sandbox.admin.action("configure_training_jobs", time_scale=before["time_scale"])


def upload_source(sb: Sandbox, folder: str, key: str) -> str:
    """sourcedir.tar.gz with the folder's files at the archive root, as the SageMaker SDK uploads it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted((JOBS / folder).iterdir()):
            if path.is_file():
                tar.add(path, arcname=path.name)
    sb.s3.put_object(Bucket=BUCKET, Key=key, Body=buf.getvalue())
    return f"s3://{BUCKET}/{key}"


def job_request(name: str, source: str, program: str, *, hosts: int = 1, spot: bool = False,
                distributed: bool = False, hps: dict[str, str] | None = None, **extra) -> dict:
    hyper = {"sagemaker_program": json.dumps(program), "sagemaker_submit_directory": json.dumps(source),
             "sagemaker_container_log_level": "20", "sagemaker_region": json.dumps("us-east-1")}
    if distributed:
        hyper["sagemaker_torch_distributed_enabled"] = "true"
    hyper.update(hps or {})
    req = dict(
        TrainingJobName=name, RoleArn=ROLE, HyperParameters=hyper,
        AlgorithmSpecification={"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": f"s3://{BUCKET}/output"},
        ResourceConfig={"InstanceType": "ml.g5.xlarge", "InstanceCount": hosts, "VolumeSizeInGB": 30},
        StoppingCondition={"MaxRuntimeInSeconds": 600},
    )
    if spot:
        req["EnableManagedSpotTraining"] = True
        req["StoppingCondition"] = {"MaxRuntimeInSeconds": 600, "MaxWaitTimeInSeconds": 1200}
        req["CheckpointConfig"] = {"S3Uri": f"s3://{BUCKET}/checkpoints/{name}"}
    req.update(extra)
    return req


def wait_until(sb: Sandbox, name: str, done: Callable[[dict], bool]) -> dict:
    while True:
        d = sb.sm.describe_training_job(TrainingJobName=name)
        if done(d):
            return d
        assert d["TrainingJobStatus"] not in TERMINAL, (d["TrainingJobStatus"], d.get("FailureReason"))
        time.sleep(0.2)


def wait_ended(sb: Sandbox, name: str) -> dict:
    while True:
        d = sb.sm.describe_training_job(TrainingJobName=name)
        if d["TrainingJobStatus"] in TERMINAL:
            return d
        time.sleep(0.2)


def statuses(d: dict) -> list[str]:
    return [t["Status"] for t in d["SecondaryStatusTransitions"]]


def is_subsequence(wanted: list[str], seen: list[str]) -> bool:
    it = iter(seen)
    return all(any(s == w for s in it) for w in wanted)


def stream_lines(sb: Sandbox, group: str, stream: str) -> list[str]:
    lines, token = [], None
    while True:
        kw = {"nextToken": token} if token else {}
        page = sb.logs.filter_log_events(logGroupName=group, logStreamNames=[stream], **kw)
        lines += [e["message"] for e in page["events"]]
        token = page.get("nextToken")
        if not token:
            return lines


def s3_keys(sb: Sandbox, prefix: str) -> list[str]:
    pages = sb.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def model_members(sb: Sandbox, name: str) -> dict[str, bytes]:
    body = sb.s3.get_object(Bucket=BUCKET, Key=f"output/{name}/output/model.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def no_zombie_or_gone(pid: int) -> bool:
    """Gone, or exited and waiting to be reaped (pid 1 here may never reap it)."""
    try:
        return psutil.Process(pid).status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.NoSuchProcess:
        return True


# ----------------------------------------------------------------------------- the Spot story

@pytest.mark.slow
@pytest.mark.timeout(180)
def test_spot_ddp_job_interrupted_once_resumes_from_checkpoint_and_completes(sb):
    name = "ddp-spot-resume"
    source = upload_source(sb, "ddp_ckpt", f"code/{name}/sourcedir.tar.gz")
    req = job_request(name, source, "train.py", hosts=2, spot=True, distributed=True,
                      hps={"steps": "8", "step-seconds": "0.3", "checkpoint-every": "2"},
                      Environment={"TRAINCTL_RUN": "spot-test"},
                      RetryStrategy={"MaximumRetryAttempts": 2},
                      Tags=[{"Key": "trainctl:job", "Value": name}])
    arn = sb.sm.create_training_job(**req)["TrainingJobArn"]
    # armed before training starts: fires when a host logs step 3
    sb.admin("interrupt_training_job", {"name": name, "after_seconds": None, "at_step": 3})

    d = wait_ended(sb, name)
    assert d["TrainingJobStatus"] == "Completed", d.get("FailureReason")
    assert d["SecondaryStatus"] == "Completed"
    assert is_subsequence(["Starting", "Downloading", "Training", "Interrupted", "Restarting", "Downloading",
                           "Training", "Uploading", "Completed"], statuses(d)), statuses(d)
    for t in d["SecondaryStatusTransitions"]:
        assert t["StatusMessage"] and t["StartTime"] <= t["EndTime"]
    assert d["TrainingStartTime"] <= d["TrainingEndTime"]
    assert 0 < d["BillableTimeInSeconds"] < d["TrainingTimeInSeconds"]
    # the request comes back as given (moto alone drops Environment)
    assert d["Environment"] == {"TRAINCTL_RUN": "spot-test"}
    assert d["EnableManagedSpotTraining"] is True
    assert d["CheckpointConfig"] == {"S3Uri": f"s3://{BUCKET}/checkpoints/{name}"}
    assert d["RetryStrategy"] == {"MaximumRetryAttempts": 2}
    assert d["HyperParameters"]["steps"] == "8"
    assert d["StoppingCondition"] == {"MaxRuntimeInSeconds": 600, "MaxWaitTimeInSeconds": 1200}
    assert sb.sm.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "trainctl:job", "Value": name}]

    # two attempts x two hosts: four streams, each host's lines in its own stream
    group = GROUP
    streams = sorted(s["logStreamName"] for s in sb.logs.describe_log_streams(logGroupName=group)["logStreams"]
                     if s["logStreamName"].startswith(name + "/"))
    assert len(streams) == 4, streams
    epochs = sorted({int(s.rsplit("-", 1)[1]) for s in streams})
    assert len(epochs) == 2
    assert streams == sorted(f"{name}/algo-{h}-{e}" for h in (1, 2) for e in epochs)
    first = {h: stream_lines(sb, group, f"{name}/algo-{h}-{epochs[0]}") for h in (1, 2)}
    second = {h: stream_lines(sb, group, f"{name}/algo-{h}-{epochs[1]}") for h in (1, 2)}
    for h in (1, 2):
        assert f"trainctl resumed_from=0 rank={h - 1} world=2" in first[h]
        assert any(re.fullmatch(r"trainctl step=3 loss=\S+ samples_per_s=\S+", x) for x in first[h])
        assert any(x.startswith("trainctl checkpointed_on_sigterm") for x in first[h])
        resumed = [int(m.group(1)) for x in second[h] if (m := re.match(r"trainctl resumed_from=(\d+)", x))]
        assert resumed and resumed[0] >= 3, second[h]
        steps = [int(m.group(1)) for x in second[h] if (m := re.match(r"trainctl step=(\d+) ", x))]
        assert steps[0] == resumed[0] + 1 and steps[-1] == 8
        assert "trainctl done step=8" in second[h]
    # real timestamps: each line's time of emission, inside the job's training window
    start_ms, end_ms = (int(d[k].timestamp() * 1000) for k in ("TrainingStartTime", "TrainingEndTime"))
    for h, e in ((1, epochs[0]), (2, epochs[1])):
        events = sb.logs.get_log_events(logGroupName=group, logStreamName=f"{name}/algo-{h}-{e}")["events"]
        stamps = [ev["timestamp"] for ev in events]
        assert stamps and stamps == sorted(stamps) and start_ms <= stamps[0] and stamps[-1] <= end_ms

    ckpts = s3_keys(sb, f"checkpoints/{name}/")
    assert f"checkpoints/{name}/ckpt-{resumed[0]:06d}.pt" in ckpts
    assert f"checkpoints/{name}/ckpt-000008.pt" in ckpts
    assert "model.pt" in model_members(sb, name)
    assert sb.admin("training_job_processes", {"name": name})["pids"] == []


# ----------------------------------------------------------------------------- validation

def _error(call: Callable[[], Any]) -> tuple[str, str]:
    with pytest.raises(ClientError) as info:
        call()
    return info.value.response["Error"]["Code"], info.value.response["Error"]["Message"]


def test_create_training_job_validates_like_aws(sb):
    source = upload_source(sb, "tiny", "code/tiny/sourcedir.tar.gz")

    def create(**over):
        return lambda: sb.sm.create_training_job(**{**job_request("val-job", source, "job.py"), **over})

    code, msg = _error(create(EnableManagedSpotTraining=True, StoppingCondition={"MaxRuntimeInSeconds": 600}))
    assert code == "ValidationException" and "MaxWaitTimeInSeconds" in msg
    code, msg = _error(create(EnableManagedSpotTraining=True,
                              StoppingCondition={"MaxRuntimeInSeconds": 600, "MaxWaitTimeInSeconds": 300}))
    assert code == "ValidationException" and "greater than or equal to MaxRuntimeInSeconds" in msg
    code, msg = _error(create(StoppingCondition={"MaxRuntimeInSeconds": 600, "MaxWaitTimeInSeconds": 900}))
    assert code == "ValidationException" and "EnableManagedSpotTraining" in msg
    code, msg = _error(create(RoleArn="arn:aws:iam::123:user/not-a-role-at-all"))
    assert code == "ValidationException" and "roleArn" in msg
    code, msg = _error(create(ResourceConfig={"InstanceType": "ml.g5.xlarge", "InstanceCount": 0,
                                              "VolumeSizeInGB": 30}))
    assert code == "ValidationException" and "resourceConfig.instanceCount" in msg
    code, msg = _error(create(TrainingJobName="bad_name!"))
    assert code == "ValidationException" and "trainingJobName" in msg
    code, msg = _error(create(RoleArn="arn:aws:iam::1:user/x", OutputDataConfig={"S3OutputPath": "/tmp/out"}))
    assert code == "ValidationException" and msg.startswith("2 validation errors detected")
    code, msg = _error(create(VpcConfig={"SecurityGroupIds": ["sg-12345678"], "Subnets": ["subnet-12345678"]}))
    assert code == "ValidationException" and "subnet-12345678" in msg
    assert sb.sm.list_training_jobs()["TrainingJobSummaries"] == []  # nothing was created

    # managed Spot without CheckpointConfig is accepted (AWS only recommends one)
    spot = job_request("val-job", source, "job.py", spot=True)
    del spot["CheckpointConfig"]
    sb.sm.create_training_job(**spot)
    code, msg = _error(create())
    assert code == "ResourceInUse" and "val-job" in msg
    wait_ended(sb, "val-job")
    code, msg = _error(lambda: sb.sm.describe_training_job(TrainingJobName="no-such-job"))
    assert code == "ValidationException"
    code, _ = _error(lambda: sb.sm.stop_training_job(TrainingJobName="no-such-job"))
    assert code == "ResourceNotFound"


# ----------------------------------------------------------------------------- container contract

def test_job_gets_the_sagemaker_container_contract(sb):
    name = "contract-job"
    source = upload_source(sb, "tiny", f"code/{name}/sourcedir.tar.gz")
    sb.s3.put_object(Bucket=BUCKET, Key="data/train/part-0.csv", Body=b"1,2\n")
    req = job_request(name, source, "job.py", hosts=2, hps={"learning-rate": "0.5", "mode": '"ok"'},
                      Environment={"USER_FLAG": "on", "USER_CKPT": "/opt/ml/checkpoints/x"},
                      InputDataConfig=[{"ChannelName": "train", "DataSource": {"S3DataSource": {
                          "S3DataType": "S3Prefix", "S3Uri": f"s3://{BUCKET}/data/train"}}}])
    sb.sm.create_training_job(**req)
    d = wait_ended(sb, name)
    assert d["TrainingJobStatus"] == "Completed", d.get("FailureReason")
    assert d["BillableTimeInSeconds"] == d["TrainingTimeInSeconds"]  # On-Demand: all of it is billed
    files = model_members(sb, name)
    assert files["model.txt"] == b"steps=3"
    info = sb.admin("training_job_sandbox_info", {"name": name})
    for host in ("algo-1", "algo-2"):
        c = json.loads(files[f"contract-{host}.json"])
        env, argv = c["env"], c["argv"]
        assert json.loads(env["SM_HOSTS"]) == ["algo-1", "algo-2"]
        assert env["SM_CURRENT_HOST"] == host and env["SM_NUM_GPUS"] == "0"
        assert json.loads(env["SM_HPS"]) == {"learning-rate": 0.5, "mode": "ok"}
        assert json.loads(env["SM_USER_ARGS"]) == ["--learning-rate", "0.5", "--mode", "ok"]
        assert json.loads(env["SM_TRAINING_ENV"])["hosts"] == ["algo-1", "algo-2"]
        assert json.loads(env["SM_CHANNELS"]) == ["train"]
        host_dir = next(p for p in info["hosts"] if p.endswith(host))
        # a host sees its own folder at /opt/ml (a private mount namespace), else the folder's own path
        seen = "/opt/ml" if info["private_opt_ml"] else host_dir
        assert env["SM_CHANNEL_TRAIN"] == f"{seen}/input/data/train"
        assert c["channel_files"] == ["part-0.csv"]
        assert (Path(host_dir) / "input/data/train/part-0.csv").read_bytes() == b"1,2\n"
        assert env["SM_MODEL_DIR"] == f"{seen}/model"
        assert env["SM_OUTPUT_DATA_DIR"] == f"{seen}/output/data"
        assert env["TRAINING_JOB_NAME"] == name and env["AWS_ENDPOINT_URL"] == sb.endpoint_url
        assert env["USER_FLAG"] == "on"
        if info["private_opt_ml"]:  # exactly the hyperparameters, as the training toolkit passes them
            assert env["USER_CKPT"] == "/opt/ml/checkpoints/x"
            assert argv == ["--learning-rate", "0.5", "--mode", "ok"]
            assert c["cwd"] == "/opt/ml/code"
        else:  # /opt/ml paths map to the host folder, and the checkpoint folder is passed
            assert env["USER_CKPT"] == f"{host_dir}/checkpoints/x"
            assert argv == ["--learning-rate", "0.5", "--mode", "ok", "--checkpoint-dir", f"{host_dir}/checkpoints"]
    group = GROUP
    names = [s["logStreamName"] for s in sb.logs.describe_log_streams(logGroupName=group)["logStreams"]]
    assert len([n for n in names if n.startswith(f"{name}/algo-")]) == 2


# ----------------------------------------------------------------------------- endings

def test_stop_training_job_sigterms_then_stopped_with_model_and_checkpoints(sb):
    name = "stop-me"
    source = upload_source(sb, "tiny", f"code/{name}/sourcedir.tar.gz")
    sb.sm.create_training_job(**job_request(name, source, "job.py", hosts=2, hps={"mode": "sleep"},
                                            CheckpointConfig={"S3Uri": f"s3://{BUCKET}/ckpt/{name}/"}))
    wait_until(sb, name, lambda d: d["SecondaryStatus"] == "Training")
    group = GROUP
    # both hosts are running the script (not just started) before the stop
    while not all(any("trainctl step=" in line for line in stream_lines(sb, group, s["logStreamName"]))
                  for s in sb.logs.describe_log_streams(logGroupName=group, logStreamNamePrefix=name)["logStreams"]
                  if s["logStreamName"].startswith(name)):
        time.sleep(0.1)
    assert sb.admin("training_job_processes", {"name": name})["pids"]
    running = sb.sm.list_training_jobs(StatusEquals="InProgress")["TrainingJobSummaries"]
    assert [(s["TrainingJobName"], s["SecondaryStatus"]) for s in running] == [(name, "Training")]
    sb.sm.stop_training_job(TrainingJobName=name)
    assert sb.sm.describe_training_job(TrainingJobName=name)["TrainingJobStatus"] in ("Stopping", "Stopped")
    sb.sm.stop_training_job(TrainingJobName=name)  # stopping twice is fine while it stops
    d = wait_ended(sb, name)
    assert d["TrainingJobStatus"] == "Stopped" and d["SecondaryStatus"] == "Stopped"
    assert is_subsequence(["Training", "Stopping", "Stopped"], statuses(d))
    ckpts = s3_keys(sb, f"ckpt/{name}/")
    assert any("algo-1-step-" in k for k in ckpts) and any("algo-2-step-" in k for k in ckpts), ckpts
    assert "contract-algo-1.json" in model_members(sb, name)
    assert sb.admin("training_job_processes", {"name": name})["pids"] == []
    code, msg = _error(lambda: sb.sm.stop_training_job(TrainingJobName=name))
    assert code == "ValidationException" and "Stopped" in msg


def test_failing_script_ends_failed_with_the_error_quoted(sb):
    source = upload_source(sb, "tiny", "code/fail/sourcedir.tar.gz")
    sb.sm.create_training_job(**job_request("fails", source, "job.py", hps={"mode": "fail"}))
    sb.sm.create_training_job(**job_request("succeeds", source, "job.py"))
    d = wait_ended(sb, "fails")
    assert d["TrainingJobStatus"] == "Failed" and d["SecondaryStatus"] == "Failed"
    assert d["FailureReason"].startswith("AlgorithmError: ")
    assert "RuntimeError: tiny job failed on purpose" in d["FailureReason"]
    assert "ExitCode 1" in d["FailureReason"]
    stream = next(s["logStreamName"] for s in sb.logs.describe_log_streams(
        logGroupName=GROUP)["logStreams"] if s["logStreamName"].startswith("fails/"))
    assert "about to fail" in stream_lines(sb, GROUP, stream)
    assert wait_ended(sb, "succeeds")["TrainingJobStatus"] == "Completed"

    def listed(**kw):
        return [(s["TrainingJobName"], s["SecondaryStatus"])
                for s in sb.sm.list_training_jobs(**kw)["TrainingJobSummaries"]]

    assert listed(StatusEquals="Failed") == [("fails", "Failed")]
    assert listed(StatusEquals="Completed") == [("succeeds", "Completed")]
    assert listed(StatusEquals="InProgress") == []
    assert [n for n, _ in listed(SortBy="Name", SortOrder="Descending")] == ["succeeds", "fails"]
    assert [n for n, _ in listed(NameContains="fail")] == ["fails"]


def test_max_runtime_exceeded_stops_the_job(sb):
    source = upload_source(sb, "tiny", "code/long/sourcedir.tar.gz")
    sb.sm.create_training_job(**job_request("too-long", source, "job.py", hps={"mode": "sleep"},
                                            StoppingCondition={"MaxRuntimeInSeconds": 1}))
    d = wait_ended(sb, "too-long")
    assert (d["TrainingJobStatus"], d["SecondaryStatus"]) == ("Stopped", "MaxRuntimeExceeded")
    assert "model.txt" not in model_members(sb, "too-long")  # stopped before the script finished


def test_capacity_faults_fail_on_demand_and_expire_spot_after_max_wait(sb):
    source = upload_source(sb, "tiny", "code/cap/sourcedir.tar.gz")
    vpc = sb.ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = sb.ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone="us-east-1a")
    sg = sb.ec2.create_security_group(GroupName="train", Description="train", VpcId=vpc)["GroupId"]
    vpc_config = {"SecurityGroupIds": [sg], "Subnets": [subnet["Subnet"]["SubnetId"]]}
    sb.shared.admin.set_capacity("ml.g5.xlarge", "us-east-1a")

    sb.sm.create_training_job(**job_request("od-no-capacity", source, "job.py", VpcConfig=vpc_config))
    spot = job_request("spot-no-capacity", source, "job.py", spot=True, VpcConfig=vpc_config,
                       StoppingCondition={"MaxRuntimeInSeconds": 1, "MaxWaitTimeInSeconds": 3})
    sb.sm.create_training_job(**spot)
    # outside the VPC the type is only short in us-east-1a, so an AZ-less job runs
    sb.sm.create_training_job(**job_request("no-vpc", source, "job.py"))

    d = wait_ended(sb, "od-no-capacity")
    assert d["TrainingJobStatus"] == "Failed"
    assert "InsufficientInstanceCapacity" in d["FailureReason"] and "us-east-1a" in d["FailureReason"]
    assert d["VpcConfig"] == vpc_config
    d = wait_ended(sb, "spot-no-capacity")
    assert (d["TrainingJobStatus"], d["SecondaryStatus"]) == ("Stopped", "MaxWaitTimeExceeded")
    starting = [t for t in d["SecondaryStatusTransitions"] if t["Status"] == "Starting"]
    assert "Insufficient capacity" in starting[-1]["StatusMessage"]
    assert "TrainingStartTime" not in d  # never got instances
    assert wait_ended(sb, "no-vpc")["TrainingJobStatus"] == "Completed"


# ----------------------------------------------------------------------------- leaks

@pytest.mark.slow
@pytest.mark.timeout(120)
def test_reset_kills_every_process_of_running_jobs(sb):
    name = "leaky"
    source = upload_source(sb, "tiny", f"code/{name}/sourcedir.tar.gz")
    # torchrun starts each rank in a session of its own: killing torchrun's session is not enough
    sb.sm.create_training_job(**job_request(name, source, "job.py", hosts=2, distributed=True,
                                            hps={"mode": "sleep"}))
    group = GROUP
    wait_until(sb, name, lambda d: d["SecondaryStatus"] == "Training")
    while True:  # both ranks print steps: torchrun x2 and rank x2 are alive
        streams = [s["logStreamName"] for s in sb.logs.describe_log_streams(logGroupName=group)["logStreams"]]
        if len(streams) == 2 and all(any("trainctl step=" in x for x in stream_lines(sb, group, s))
                                     for s in streams):
            break
        time.sleep(0.2)
    pids = sb.admin("training_job_processes", {"name": name})["pids"]
    assert len(pids) >= 4, pids
    workdir = sb.admin("training_job_sandbox_info", {"name": name})["workdir"]
    sb.shared.admin.reset()
    assert sb.admin("training_job_processes", {})["pids"] == []
    assert all(no_zombie_or_gone(p) for p in pids)
    assert not Path(workdir).exists()
    code, _ = _error(lambda: sb.sm.describe_training_job(TrainingJobName=name))
    assert code == "ValidationException"


def test_sagemaker_distributed_libraries_run_with_torchrun_or_fail_where_sagemaker_refuses_them(sb):
    """The SDK v2's smddp hyperparameters (with torch_distributed, as trainctl sends them) run the job
    with torchrun on an SMDDP instance type; off SMDDP's types, and on p5 without torch_distributed (the SDK's
    own refusal), the job fails before the script runs."""
    source = upload_source(sb, "tiny", "code/dist/sourcedir.tar.gz")
    smddp = {"sagemaker_distributed_dataparallel_enabled": "true",
             "sagemaker_distributed_dataparallel_custom_mpi_options": '""'}

    def job(name: str, itype: str, torchrun: bool) -> None:
        hps = {**smddp, "sagemaker_instance_type": json.dumps(itype)}
        req = job_request(name, source, "job.py", distributed=torchrun, hps=hps)
        req["ResourceConfig"]["InstanceType"] = itype
        sb.sm.create_training_job(**req)

    job("smddp-p4d", "ml.p4d.24xlarge", True)
    job("smddp-g5", "ml.g5.xlarge", True)
    job("smddp-p5-mpi", "ml.p5.48xlarge", False)
    assert wait_ended(sb, "smddp-p4d")["TrainingJobStatus"] == "Completed"
    g5 = wait_ended(sb, "smddp-g5")
    assert g5["TrainingJobStatus"] == "Failed" and "does not support ml.g5.xlarge" in g5["FailureReason"]
    p5 = wait_ended(sb, "smddp-p5-mpi")
    assert p5["FailureReason"] == "ClientError: SMModelParallel and SMDataParallel currently do not support p5 " \
                                  "instances."


def test_a_role_sagemaker_cannot_assume_is_refused(sandbox):
    """AWS assumes the execution role at CreateTrainingJob: a missing role, one that does not trust
    SageMaker, or one too new for IAM to have propagated it is refused with AWS's message."""
    sm, iam = sandbox.client("sagemaker"), sandbox.client("iam")
    params = dict(AlgorithmSpecification={"TrainingImage": "img", "TrainingInputMode": "File"},
                  OutputDataConfig={"S3OutputPath": "s3://trainctl-123456789012-us-east-1/out"},
                  ResourceConfig={"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
                  StoppingCondition={"MaxRuntimeInSeconds": 60})
    with pytest.raises(sm.exceptions.ClientError, match="Could not assume role .*sagemaker.amazonaws.com"):
        sm.create_training_job(TrainingJobName="no-role", RoleArn="arn:aws:iam::123456789012:role/none", **params)
    ec2_trust = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
    ec2_only = iam.create_role(RoleName="ec2-only", AssumeRolePolicyDocument=json.dumps(ec2_trust))["Role"]["Arn"]
    with pytest.raises(sm.exceptions.ClientError, match="Could not assume role"):
        sm.create_training_job(TrainingJobName="ec2-role", RoleArn=ec2_only, **params)
    before = sandbox.admin.action("configure_training_jobs")
    sandbox.admin.action("configure_training_jobs", role_propagation_s=3600 / before["time_scale"])
    try:
        trust = {**ec2_trust, "Statement": [{**ec2_trust["Statement"][0], "Principal": {"Service": "sagemaker.amazonaws.com"}}]}
        fresh = iam.create_role(RoleName="fresh", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        with pytest.raises(sm.exceptions.ClientError, match="Could not assume role"):
            sm.create_training_job(TrainingJobName="fresh-role", RoleArn=fresh, **params)
    finally:
        sandbox.admin.action("configure_training_jobs", role_propagation_s=0)
