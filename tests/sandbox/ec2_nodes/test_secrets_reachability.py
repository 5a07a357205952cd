"""A job with `secrets:` reads them from SSM and Secrets Manager when it starts. In a subnet without a NAT
(VPC endpoints only) those services need their interface endpoints too: `launch` and `doctor` say so before
anything bills, on both platforms, and the sandbox's SageMaker job fails reading them as on AWS."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.helpers import run_cli
from trainctl_sandbox.testing import add_endpoints

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "own-script"
SECRETS = {"HF_TOKEN": "arn:aws:ssm:us-east-1:123456789012:parameter/trainctl/own-script/hf-token",
           "DB_PASSWORD": "arn:aws:secretsmanager:us-east-1:123456789012:secret:trainctl/own-script/db-AbCdEf"}


def _spec(tmp_path, secrets: bool, layout: str = "g5.xlarge:1:spot") -> str:
    shutil.copy(EXAMPLE / "train.py", tmp_path / "train.py")
    text = (EXAMPLE / "job.yaml").read_text().replace("platforms: [sagemaker]", "platforms: [sagemaker, ec2]")
    text = text.replace('layouts: ["g5.xlarge:1:spot"]', f'layouts: ["{layout}"]')
    if secrets:
        text += "secrets:\n" + "".join(f"  {k}: {v}\n" for k, v in SECRETS.items())
    path = tmp_path / ("with-secrets.yaml" if secrets else "without.yaml")
    path.write_text(text)
    return str(path)


def _dry_run(sb, tmp_path, spec: str, *args: str):
    return run_cli(["--output", "json", "launch", spec, *args, "--region", "us-east-1", "--dry-run"],
                   tmp_path / "home", env=sb.env)


def _one_line(proc) -> str:
    assert proc.returncode != 0 and proc.stdout == "", proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("args", [("--platform", "ec2", "--layout", "p4d.24xlarge:2:on-demand"),
                                  ("--platform", "sagemaker", "--layout", "g5.xlarge:2:spot")])
def test_secrets_behind_endpoints_need_the_ssm_and_secrets_manager_endpoints(sandbox_env, tmp_path, args):
    sb = sandbox_env
    add_endpoints(sb, ("ec2", "logs"), region="us-east-1")  # S3 gateway, EC2 and Logs: no NAT
    assert _dry_run(sb, tmp_path, _spec(tmp_path, secrets=False), *args).returncode == 0
    err = _one_line(_dry_run(sb, tmp_path, _spec(tmp_path, secrets=True), *args))
    assert "an interface endpoint for ssm" in err and "an interface endpoint for secretsmanager" in err, err
    add_endpoints(sb, ("ssm", "secretsmanager"), s3=False, region="us-east-1")
    proc = _dry_run(sb, tmp_path, _spec(tmp_path, secrets=True), *args)
    assert proc.returncode == 0, proc.stderr


def test_doctor_checks_the_secrets_endpoints(sandbox_env, tmp_path):
    sb = sandbox_env
    add_endpoints(sb, ("ec2", "logs"), region="us-east-1")
    spec = _spec(tmp_path, secrets=True, layout="p4d.24xlarge:2:on-demand")  # no public IPv4
    proc = run_cli(["--output", "json", "doctor", spec, "--platform", "ec2"],
                   tmp_path / "home", env=sb.env)
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    node = checks["EC2 nodes reach AWS"]
    assert node["status"] == "fail" and "ssm" in json.dumps(node), node


@pytest.mark.timeout(120)
def test_sandbox_vpc_job_without_the_secrets_endpoint_fails_reading_them(sandbox):
    from tests.support.vpc_jobs import TRAIN, first_subnet, job_group, wait_ended

    add_endpoints(sandbox, ())  # S3 only
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("train.py")
        info.size = len(TRAIN.encode())
        tar.addfile(info, io.BytesIO(TRAIN.encode()))
    bucket = "trainctl-123456789012-us-east-1"
    sandbox.client("s3").put_object(Bucket=bucket, Key="sec/sourcedir.tar.gz", Body=buf.getvalue())
    sandbox.client("sagemaker").create_training_job(
        TrainingJobName="sec", RoleArn="arn:aws:iam::123456789012:role/trainctl-sagemaker-execution",
        AlgorithmSpecification={"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:"
                                                 "2.3-cpu-py311", "TrainingInputMode": "File"},
        HyperParameters={"sagemaker_program": '"train.py"',
                         "sagemaker_submit_directory": f'"s3://{bucket}/sec/sourcedir.tar.gz"'},
        Environment={"TRAINCTL_SECRET_ARN_HF_TOKEN": SECRETS["HF_TOKEN"]},
        OutputDataConfig={"S3OutputPath": f"s3://{bucket}/out"},
        ResourceConfig={"InstanceType": "ml.g5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 50},
        VpcConfig={"SecurityGroupIds": [job_group(sandbox, True)], "Subnets": [first_subnet(sandbox)]},
        StoppingCondition={"MaxRuntimeInSeconds": 600})
    d = wait_ended(sandbox, "sec")
    assert d["TrainingJobStatus"] == "Failed" and "https://ssm.us-east-1.amazonaws.com/" in d["FailureReason"], d
