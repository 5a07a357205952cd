"""Each SageMaker job runs with its own execution role: the launch creates it under
/trainctl/ with the permissions boundary, asks again while IAM has not yet made it assumable, and `down`
deletes it once the job has ended. A given --role is used as it is. Through the CLI against the sandbox."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.helpers import run_cli

SPEC = str(Path(__file__).parents[2] / "support" / "launch_specs" / "tiny-vit-sagemaker.yaml")


def cli(sandbox, home: Path, *args: str, ok=(0,)):
    proc = run_cli(list(args), home, env=sandbox.env, timeout=200)
    assert proc.returncode in ok, proc.stderr
    return proc


@pytest.mark.timeout(240)
def test_a_job_gets_its_own_role_that_down_removes(sm, tmp_path):
    # IAM takes a moment to make a new role assumable: the sandbox refuses it for 1.5 s after creation
    scale = sm.admin.action("configure_training_jobs")["time_scale"]
    sm.admin.action("configure_training_jobs", role_propagation_s=1.5 / scale)
    try:
        launched = cli(sm, tmp_path, "-o", "json", "launch", SPEC, "--yes", "--layout", "g5.xlarge:1:on-demand")
    finally:
        sm.admin.action("configure_training_jobs", role_propagation_s=0)
    job = json.loads(launched.stdout)["job_id"]
    assert "Could not assume role" not in launched.stdout and "asking again" in launched.stderr

    iam = sm.client("iam")
    name = f"trainctl-{job}"
    role = iam.get_role(RoleName=name)["Role"]
    assert role["Path"] == "/trainctl/" and role["PermissionsBoundary"]["PermissionsBoundaryArn"].endswith(
        ":policy/trainctl-boundary")
    assert {"Key": "trainctl:job", "Value": job} in iam.list_role_tags(RoleName=name)["Tags"]
    described = sm.client("sagemaker").describe_training_job(TrainingJobName=job)
    assert described["RoleArn"] == role["Arn"]
    policy = json.dumps(iam.get_role_policy(RoleName=name, PolicyName="trainctl-sagemaker-job")["PolicyDocument"])
    assert f"/{job}/checkpoints/*" in policy and f"/{job}/output/*" in policy
    assert "ec2:CreateNetworkInterface" not in policy  # one node: no VPC, so no network interfaces

    cli(sm, tmp_path, "watch", job, "--interval", "0.3")
    assert sm.client("sagemaker").describe_training_job(TrainingJobName=job)["TrainingJobStatus"] == "Completed"
    down = cli(sm, tmp_path, "down", job)
    assert f"execution role {name}" in down.stdout + down.stderr
    assert iam.list_roles(PathPrefix="/trainctl/")["Roles"] == []


def test_a_given_role_is_used_and_no_role_is_created(sm, tmp_path):
    doc = json.loads(cli(sm, tmp_path, "-o", "json", "launch", SPEC, "--dry-run", "--role",
                         "trainctl-sagemaker-execution").stdout)
    ops = [r["operation"] for r in doc["requests"]]
    assert "CreateRole" not in ops and "PutRolePolicy" not in ops
    assert doc["requests"][-1]["params"]["RoleArn"].endswith(":role/trainctl-sagemaker-execution")
    assert "retry" not in doc["requests"][-1]  # an existing role is assumable: nothing to wait for
    assert any("creates no role" in n and "docs/security.md" in n for n in doc["notes"])


def test_a_role_sagemaker_cannot_assume_is_refused_by_the_sandbox_as_aws_does(sm, tmp_path):
    trust = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
    arn = sm.client("iam").create_role(RoleName="ec2-only-x", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    doc = json.loads(cli(sm, tmp_path, "-o", "json", "launch", SPEC, "--dry-run", "--layout",
                         "g5.xlarge:1:on-demand").stdout)
    params = {**doc["requests"][-1]["params"], "RoleArn": arn}
    params["TrainingJobName"] = "refused-role-1"
    with pytest.raises(Exception, match="Could not assume role"):
        sm.client("sagemaker").create_training_job(**params)
