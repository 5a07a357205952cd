"""`trainctl launch / watch / logs / ls / stop` on SageMaker, through the CLI in a subprocess against the
sandbox over HTTP. Faults come from the sandbox's own switches (capacity, Spot interruption); no
trainctl function is mocked. Waits end when the job ends (pytest-timeout bounds them); nothing is timed."""
from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import botocore.session
import pytest
from botocore.validate import validate_parameters

from tests.support.helpers import run_cli

SPEC = str(Path(__file__).parents[1] / "support" / "launch_specs" / "tiny-vit-sagemaker.yaml")
ACCOUNT_BUCKET = "trainctl-123456789012-us-east-1"


def cli(sandbox, home: Path, *args: str, timeout: float = 150):
    return run_cli(list(args), home, env=sandbox.env, timeout=timeout)


def cli_json(sandbox, home: Path, *args: str, ok=(0,)) -> dict:
    proc = cli(sandbox, home, "--output", "json", *args)
    assert proc.returncode in ok, proc.stderr
    return json.loads(proc.stdout)


def interrupt(sandbox, job: str, **when) -> dict:
    # POSTed by hand: SandboxAdmin.action(name, **payload) cannot carry the payload key "name"
    req = urllib.request.Request(f"{sandbox.endpoint_url}/_trainctl/admin/interrupt_training_job", method="POST",
                                 data=json.dumps({"name": job, **when}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def _blobs_to_bytes(value):
    if isinstance(value, dict) and set(value) == {"bytes", "sha256"}:
        return b"\0" * value["bytes"]
    if isinstance(value, dict):
        return {k: _blobs_to_bytes(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_blobs_to_bytes(v) for v in value]
    return value


def test_dry_run_prints_valid_requests_and_creates_nothing(sm, tmp_path):
    doc = cli_json(sm, tmp_path, "launch", SPEC, "--dry-run")
    assert doc["platform"] == "sagemaker" and doc["option"]["rank"] == 1
    session = botocore.session.get_session()
    ops = [r["operation"] for r in doc["requests"]]
    assert ops[-1] == "CreateTrainingJob"
    assert {"PutObject", "CreateSecurityGroup", "AuthorizeSecurityGroupIngress", "PutBucketEncryption",
            "PutPublicAccessBlock"} <= set(ops)
    for r in doc["requests"]:
        model = session.get_service_model(r["service"]).operation_model(r["operation"])
        validate_parameters(_blobs_to_bytes(r["params"]), model.input_shape)  # raises ParamValidationError

    create = doc["requests"][-1]["params"]
    job = doc["job_id"]
    assert create["TrainingJobName"] == job
    # the job's own execution role, made just before, under /trainctl/ with the permissions boundary
    assert create["RoleArn"] == f"arn:aws:iam::123456789012:role/trainctl/trainctl-{job}"
    role = next(r for r in doc["requests"] if r["operation"] == "CreateRole")
    assert role["params"]["Path"] == "/trainctl/" and role["params"]["PermissionsBoundary"].endswith(
        ":policy/trainctl-boundary")
    assert "Could not assume role" in doc["requests"][-1]["retry"]["on"]  # IAM's eventual consistency
    hps = create["HyperParameters"]
    assert json.loads(hps["sagemaker_program"]) == "train_ddp.py"
    assert json.loads(hps["sagemaker_submit_directory"]).startswith(f"s3://{ACCOUNT_BUCKET}/trainctl/code/")
    assert hps["sagemaker_torch_distributed_enabled"] == "true"  # 2 hosts
    assert json.loads(hps["model"]) == "vit_micro" and json.loads(hps["steps"]) == 12  # 192 / (8 x 2)
    assert create["EnableManagedSpotTraining"] is True
    stop = create["StoppingCondition"]
    assert stop["MaxWaitTimeInSeconds"] >= stop["MaxRuntimeInSeconds"]
    assert create["CheckpointConfig"]["LocalPath"] == "/opt/ml/checkpoints"
    assert len(create["VpcConfig"]["Subnets"]) == 1 and create["VpcConfig"]["SecurityGroupIds"] == [
        "${security_group_id}"]
    assert {"Key": "trainctl:job", "Value": job} in create["Tags"]
    ingress = next(r for r in doc["requests"] if r["operation"] == "AuthorizeSecurityGroupIngress")["params"]
    (rule,) = ingress["IpPermissions"]  # one rule: all traffic, from the group itself, from no address range
    assert rule["IpProtocol"] == "-1" and "IpRanges" not in rule and "Ipv6Ranges" not in rule
    assert [pair["GroupId"] for pair in rule["UserIdGroupPairs"]] == ["${security_group_id}"]
    # the subnet is in the AZ the plan scored best
    ec2 = sm.client("ec2")
    subnet = ec2.describe_subnets(SubnetIds=create["VpcConfig"]["Subnets"])["Subnets"][0]
    if doc["option"]["availability_zone"]:
        assert subnet["AvailabilityZone"] == doc["option"]["availability_zone"]
    # the code tarball carries the shared module and the requirements the image lacks
    put = next(r for r in doc["requests"] if r["operation"] == "PutObject")
    assert put["why"].startswith("code: ") and put["why"].endswith("runs train_ddp.py")
    listed = next(n for n in doc["notes"] if n.startswith("code ") and "files (" in n)
    assert all(name in listed for name in ("train_ddp.py", "trainctl_common.py", "requirements.txt")), listed

    # nothing was created
    assert sm.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []
    assert ec2.describe_security_groups(Filters=[{"Name": "tag:trainctl:job", "Values": [job]}])["SecurityGroups"] == []
    assert "Contents" not in sm.client("s3").list_objects_v2(Bucket=ACCOUNT_BUCKET, Prefix="trainctl/")


def test_missing_role_is_one_line_naming_the_fix(sm, tmp_path):
    proc = cli(sm, tmp_path, "launch", SPEC, "--dry-run", "--role", "no-such-role")
    assert proc.returncode == 1
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "no-such-role" in err[0] and "not found" in err[0] and "--role" in err[0], err


def test_role_that_does_not_trust_sagemaker_is_refused(sm, tmp_path):
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                                                     "Action": "sts:AssumeRole"}]}
    sm.client("iam").create_role(RoleName="ec2-only", AssumeRolePolicyDocument=json.dumps(trust))
    proc = cli(sm, tmp_path, "launch", SPEC, "--dry-run", "--role", "ec2-only")
    assert proc.returncode == 1
    assert "does not trust sagemaker.amazonaws.com" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_saved_plan_and_user_source_dir(sm, tmp_path):
    src = tmp_path / "proj"
    (src / "data").mkdir(parents=True)
    (src / "train.py").write_text("print('trainctl step=1 loss=1.0 samples_per_s=10.0')\n")
    (src / "data" / "big.bin").write_bytes(b"x" * 1000)
    (src / ".gitignore").write_text("data/\n")
    spec = tmp_path / "user.yaml"
    spec.write_text(Path(SPEC).read_text().replace("  bundled: ddp\n", "  script: train.py\n  source_dir: proj\n"))
    plan = cli_json(sm, tmp_path, "plan", str(spec))
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    doc = cli_json(sm, tmp_path, "launch", str(spec), "--plan", str(tmp_path / "plan.json"), "--option", "1",
                   "--dry-run")
    assert doc["option"] == plan["options"][0]
    put = next(r for r in doc["requests"] if r["operation"] == "PutObject")
    assert put["why"] == "code: 2 files, runs train.py"  # data/ excluded as .gitignore says
    assert any(n.startswith("code 2 files (.gitignore, train.py)") for n in doc["notes"]), doc["notes"]
    hps = doc["requests"][-1]["params"]["HyperParameters"]
    assert json.loads(hps["sagemaker_program"]) == "train.py"
    assert "steps" not in hps  # only the bundled entrypoint is told its step count
    proc = cli(sm, tmp_path, "launch", str(spec), "--plan", str(tmp_path / "plan.json"), "--option", "7",
               "--dry-run")
    assert proc.returncode == 2 and "--option 7" in proc.stderr


def test_launch_without_yes_and_without_terminal_refuses(sm, tmp_path):
    proc = cli(sm, tmp_path, "launch", SPEC)
    assert proc.returncode == 2 and "--yes" in proc.stderr
    assert sm.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []


@pytest.mark.timeout(240)
def test_spot_job_interrupted_once_is_watched_to_completion_and_measured(sm, tmp_path):
    out = cli_json(sm, tmp_path, "launch", SPEC, "--yes")
    job = out["job_id"]
    assert out["attempts"][0]["outcome"] == "submitted"
    interrupt(sm, job, after_seconds=None, at_step=3)  # armed now, fires when a host logs step >= 3

    follow = cli(sm, tmp_path, "watch", job, "--interval", "0.3", timeout=200)
    assert follow.returncode == 0, follow.stderr
    assert "Interrupted" in follow.stdout and "Restarting" in follow.stdout
    assert "algo-1 trainctl step=" in follow.stdout

    doc = cli_json(sm, tmp_path, "watch", job, "--once")
    for key in ("job_id", "platform", "status", "secondary_status", "training_seconds", "billable_seconds",
                "spot_savings_pct", "cost_usd", "throughput_samples_per_s", "interruptions", "hosts"):
        assert key in doc
    assert doc["status"] == "Completed" and doc["platform"] == "sagemaker"
    assert doc["interruptions"] == 1
    assert doc["hosts"] == ["algo-1", "algo-2"]
    assert 0 < doc["billable_seconds"] < doc["training_seconds"]
    assert doc["spot_savings_pct"] > 0
    assert doc["throughput_samples_per_s"] > 0 and doc["cost_usd"] > 0

    # every host's lines, interleaved; one host alone on request
    both = cli(sm, tmp_path, "logs", job)
    assert both.returncode == 0 and " algo-1 " in both.stdout and " algo-2 " in both.stdout
    one = cli(sm, tmp_path, "logs", job, "--host", "2")
    assert one.returncode == 0 and one.stdout and "algo-1" not in one.stdout

    listed = cli_json(sm, tmp_path, "ls")["jobs"]
    assert [(j["job_id"], j["status"]) for j in listed] == [(job, "Completed")]

    plan = cli_json(sm, tmp_path, "plan", SPEC)
    opt = next(o for o in plan["options"] if o["instance_type"] == "g5.xlarge" and o["count"] == 2)
    assert opt["throughput_source"] == "measured"
    assert opt["throughput_samples_per_s"] == pytest.approx(doc["throughput_samples_per_s"], rel=0.01)

    # the prediction stored at launch against what watch measured (the sandbox's store, not AWS's)
    cal = cli_json(sm, tmp_path, "calibration")
    row = next(r for r in cal["jobs"] if r["job_id"] == job)
    assert row["predicted_samples_per_s"] == out["option"]["throughput_samples_per_s"]
    assert row["measured_samples_per_s"] == doc["throughput_samples_per_s"]
    assert row["error"] == pytest.approx(row["predicted_samples_per_s"] / row["measured_samples_per_s"] - 1, abs=1e-3)
    assert cal["endpoint"] != "aws" and cal["summary"]["compared"] == 1


@pytest.mark.timeout(240)
def test_failover_moves_to_the_next_option_when_capacity_is_refused(sm, tmp_path):
    sm.admin.set_capacity("g5.xlarge", available=False)  # every AZ
    long_spec = tmp_path / "long-vit.yaml"  # still running when `stop` comes below, however fast this machine is
    long_spec.write_text(Path(SPEC).read_text().replace("samples: 192", "samples: 192000000"))
    out = cli_json(sm, tmp_path, "launch", str(long_spec), "--yes", "--failover", "--poll-seconds", "0.2",
                   "--layout", "g5.xlarge:1:on-demand", "--layout", "g5.2xlarge:1:on-demand")
    first, second = out["attempts"]
    assert first["layout"] == "g5.xlarge:1:on-demand" and first["outcome"].startswith("no capacity")
    assert second["layout"] == "g5.2xlarge:1:on-demand" and second["outcome"] == "running"
    assert out["job_id"] == second["job_id"]
    sagemaker = sm.client("sagemaker")
    d1 = sagemaker.describe_training_job(TrainingJobName=first["job_id"])
    assert d1["TrainingJobStatus"] == "Failed" and "CapacityError" in d1["FailureReason"]
    d2 = sagemaker.describe_training_job(TrainingJobName=second["job_id"])
    assert d2["ResourceConfig"]["InstanceType"] == "ml.g5.2xlarge"
    assert any(t["Status"] == "Training" for t in d2["SecondaryStatusTransitions"])
    # one node runs outside any VPC: neither attempt made a security group
    ec2 = sm.client("ec2")
    tagged = {j: ec2.describe_security_groups(Filters=[{"Name": "tag:trainctl:job", "Values": [j]}])["SecurityGroups"]
              for j in (first["job_id"], second["job_id"])}
    assert tagged == {first["job_id"]: [], second["job_id"]: []} and "VpcConfig" not in d2

    # the code is stored under its content hash: a second launch of the same code uploads nothing
    again = cli_json(sm, tmp_path, "launch", SPEC, "--dry-run")
    assert "PutObject" not in [r["operation"] for r in again["requests"]]
    assert any("already at s3://" in n for n in again["notes"])

    # both attempts are recorded, with their options
    jobs = {j["job_id"]: j for j in cli_json(sm, tmp_path, "ls", "--no-status")["jobs"]}
    assert jobs[first["job_id"]]["recorded_status"] == "NoCapacity"
    assert jobs[second["job_id"]]["layout"] == "1x g5.2xlarge"

    # stop: the job ends Stopped and watch exits non-zero with that outcome
    assert cli(sm, tmp_path, "stop", second["job_id"]).returncode == 0
    watched = cli(sm, tmp_path, "--output", "json", "watch", second["job_id"], "--interval", "0.3", "--no-logs")
    assert watched.returncode == 3, watched.stderr
    assert json.loads(watched.stdout)["status"] == "Stopped"
