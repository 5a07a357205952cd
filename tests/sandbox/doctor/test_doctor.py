"""`trainctl doctor` through the CLI against the sandbox: each check fails for its real cause (set up with
boto3 or the sandbox's switches, never by mocking trainctl) and passes once the printed fix is applied."""
from __future__ import annotations

import json
from pathlib import Path

from tests.support.cost_tags import activate_job_tag
from tests.support.helpers import run_cli
from trainctl_sandbox.testing import add_nat

SPEC = str(Path(__file__).parents[2] / "support" / "launch_specs" / "tiny-vit-sagemaker.yaml")
BUCKET = "trainctl-123456789012-us-east-1"


def doctor(sandbox, home: Path, *args: str):
    proc = run_cli(["--output", "json", "doctor", *args], home, env=sandbox.env, timeout=120)
    doc = json.loads(proc.stdout)
    return proc.returncode, {c["name"]: c for c in doc["checks"]}, doc


def test_failures_name_their_fix_and_pass_once_fixed(sandbox, tmp_path):
    code, checks, doc = doctor(sandbox, tmp_path, SPEC)
    assert code == 1 and doc["ok"] is False
    assert checks["credentials and region"]["status"] == "pass"
    assert checks["quotas (sagemaker)"]["status"] == "pass"
    assert checks["SageMaker execution role"]["status"] == "pass"
    assert checks["Spot placement scores"]["status"] == "pass"
    route = checks["subnet reaches S3"]  # the bundled code ships a requirements.txt: S3 alone is not enough
    assert route["status"] == "fail" and "neither an S3 gateway endpoint nor a NAT" in route["detail"]
    assert "InstallRequirementsError" in route["detail"] and "create-nat-gateway" in route["fix"]
    # trainctl's own bucket, not yet locked down: every launch encrypts it and blocks public access, so a fresh
    # account passes with a note; a bucket the user gives is used as it is, so there the same state fails
    bucket = checks["job bucket"]
    assert bucket["status"] == "pass" and "no default encryption" in bucket["detail"]
    assert "the first launch makes it encrypted and private" in bucket["detail"]
    _, given, _ = doctor(sandbox, tmp_path, SPEC, "--bucket", BUCKET)
    assert given["job bucket"]["status"] == "fail" and "put-bucket-encryption" in given["job bucket"]["fix"]

    # apply the fixes the way the fix lines say
    s3 = sandbox.client("s3")
    add_nat(sandbox)  # a NAT gateway, and the subnet's route table's 0.0.0.0/0 through it
    s3.put_bucket_encryption(Bucket=BUCKET, ServerSideEncryptionConfiguration={
        "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
    s3.put_public_access_block(Bucket=BUCKET, PublicAccessBlockConfiguration={
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True, "RestrictPublicBuckets": True})
    activate_job_tag(sandbox)  # billed dollars need the job tag active (a warning, not a failure, until then)
    code, checks, doc = doctor(sandbox, tmp_path, SPEC)
    assert code == 0 and doc["ok"], doc
    assert "NAT gateway" in checks["subnet reaches S3"]["detail"]
    assert all(c["status"] == "pass" for c in checks.values()), checks

    # the table: one line per check, the fix under a failure
    table = run_cli(["doctor", SPEC], tmp_path, env=sandbox.env, timeout=120)
    assert table.returncode == 0 and table.stdout.strip().endswith("all checks passed")
    assert sum(line.startswith("PASS  ") for line in table.stdout.splitlines()) == len(checks)


def test_role_quota_and_public_bucket(sandbox, tmp_path):
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                                                     "Action": "sts:AssumeRole"}]}
    sandbox.client("iam").create_role(RoleName="ec2-only", AssumeRolePolicyDocument=json.dumps(trust))
    sandbox.admin.set_quota("sagemaker", "ml.g5.xlarge for spot training job usage", 0)
    s3 = sandbox.client("s3")
    s3.put_public_access_block(Bucket=BUCKET, PublicAccessBlockConfiguration={
        "BlockPublicAcls": True, "IgnorePublicAcls": False, "BlockPublicPolicy": True, "RestrictPublicBuckets": True})
    code, checks, _ = doctor(sandbox, tmp_path, SPEC, "--role", "ec2-only")
    assert code == 1
    role = checks["SageMaker execution role"]
    assert role["status"] == "fail" and "does not trust sagemaker.amazonaws.com" in role["detail"]
    quota = checks["quotas (sagemaker)"]
    assert quota["status"] == "fail" and "over quota" in quota["detail"]
    assert quota["fix"].startswith("aws service-quotas request-service-quota-increase --service-code sagemaker")
    assert "IgnorePublicAcls off" in checks["job bucket"]["detail"]
    code, checks, _ = doctor(sandbox, tmp_path, SPEC, "--role", "no-such-role")
    assert checks["SageMaker execution role"]["status"] == "fail"
    assert "does not exist" in checks["SageMaker execution role"]["detail"]
    assert "iam-policy --role sagemaker-execution" in checks["SageMaker execution role"]["fix"]


def test_no_credentials_fails_first_and_skips_the_rest(tmp_path):
    proc = run_cli(["--output", "json", "doctor"], tmp_path, timeout=60)
    assert proc.returncode == 1, proc.stderr
    checks = json.loads(proc.stdout)["checks"]
    assert checks[0]["name"] == "credentials and region" and checks[0]["status"] == "fail"
    assert "aws configure" in checks[0]["fix"]
    assert {c["status"] for c in checks[1:]} == {"skip"}


def test_bad_input_is_one_line_exit_2(sandbox, tmp_path):
    for args in (["no-such.yaml"], ["--platform", "k8s"]):
        proc = run_cli(["doctor", *args], tmp_path, env=sandbox.env, timeout=60)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_the_subnet_checked_is_the_one_launch_uses(sm, tmp_path):
    dry = run_cli(["--output", "json", "launch", SPEC, "--dry-run"], tmp_path, env=sm.env, timeout=120)
    assert dry.returncode == 0, dry.stderr
    job = next(r for r in json.loads(dry.stdout)["requests"] if r["operation"] == "CreateTrainingJob")
    subnet = job["params"]["VpcConfig"]["Subnets"][0]
    code, checks, _ = doctor(sm, tmp_path, SPEC)
    route = checks["subnet reaches S3"]  # `sm` routes the default VPC through a NAT
    assert route["status"] == "pass" and f"subnet {subnet} " in route["detail"] and "NAT gateway" in route["detail"]
    # That subnet alone on a route table of its own, without the NAT: doctor sees it fail; a gateway endpoint
    # on that table gives it S3 but not PyPI; a NAT route there gives it both.
    ec2 = sm.client("ec2")
    vpc = ec2.describe_subnets(SubnetIds=[subnet])["Subnets"][0]["VpcId"]
    rtb = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    ec2.associate_route_table(RouteTableId=rtb, SubnetId=subnet)
    code, checks, _ = doctor(sm, tmp_path, SPEC)
    route = checks["subnet reaches S3"]
    assert route["status"] == "fail" and f"subnet {subnet} " in route["detail"]
    ec2.create_vpc_endpoint(VpcId=vpc, ServiceName="com.amazonaws.us-east-1.s3", VpcEndpointType="Gateway",
                            RouteTableIds=[rtb])
    code, checks, _ = doctor(sm, tmp_path, SPEC)
    route = checks["subnet reaches S3"]  # S3 now, but the bundled code's requirements.txt needs PyPI: a NAT
    assert route["status"] == "fail" and "S3 gateway endpoint" in route["detail"]
    assert "requirements.txt" in route["detail"] and f"route table {rtb} through a NAT" in route["fix"]
    nat = ec2.describe_nat_gateways()["NatGateways"][0]["NatGatewayId"]
    ec2.create_route(RouteTableId=rtb, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=nat)
    code, checks, _ = doctor(sm, tmp_path, SPEC)
    route = checks["subnet reaches S3"]
    assert route["status"] == "pass" and f"subnet {subnet} " in route["detail"] and rtb in route["detail"]


def test_no_premade_execution_role_is_needed_only_the_boundary(sandbox, tmp_path):
    """Each SageMaker job gets its own execution role from the launch: doctor asks for the permissions
    boundary those roles carry, not for a shared role."""
    iam = sandbox.client("iam")
    for name in iam.list_role_policies(RoleName="trainctl-sagemaker-execution")["PolicyNames"]:
        iam.delete_role_policy(RoleName="trainctl-sagemaker-execution", PolicyName=name)
    iam.delete_role(RoleName="trainctl-sagemaker-execution")
    _, checks, _ = doctor(sandbox, tmp_path, SPEC)
    role = checks["SageMaker execution role"]
    assert role["status"] == "pass" and "created per job" in role["detail"], role
    iam.delete_policy(PolicyArn="arn:aws:iam::123456789012:policy/trainctl-boundary")
    _, checks, _ = doctor(sandbox, tmp_path, SPEC)
    role = checks["SageMaker execution role"]
    assert role["status"] == "fail" and "trainctl-boundary" in role["detail"], role
    assert "iam-policy --role boundary" in role["fix"] and "create-policy" in role["fix"]
