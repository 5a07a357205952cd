"""The network: what AWS does to hosts without a public IPv4, and to EFA without egress to itself,
through the CLI against the strict sandbox (whose default VPC is AWS's: public subnets, an internet gateway,
no NAT, no endpoints).

- several network cards get no public IPv4 (EC2 User Guide, using-instance-addressing): an EC2 launch keeps
  only subnets with a NAT route or the S3, EC2 and Logs endpoints, or refuses in one line; `doctor` agrees;
- EFA needs the security group to allow all traffic in from and out to itself, on both platforms;
- a SageMaker job in a VPC has no internet: several nodes need S3 (gateway endpoint or NAT) and, with a
  requirements.txt, a NAT; one node runs outside any VPC.
"""
from __future__ import annotations

import json

import pytest

from tests.support.helpers import CONFIGS, run_cli
from tests.support.vpc_jobs import TRAIN, first_subnet, job_group, wait_ended
from trainctl_sandbox.testing import add_endpoints, add_nat

TINY_SM = str(CONFIGS.parent / "tests" / "support" / "launch_specs" / "tiny-vit-sagemaker.yaml")


def dry_run(sb, tmp_path, *args: str):
    return run_cli(["--output", "json", "launch", *args, "--dry-run"], tmp_path / "home", env=sb.env)


def one_line_error(proc) -> str:
    assert proc.returncode != 0 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def both_regions(fn, sb) -> None:
    for region in ("us-east-1", "us-west-2"):
        fn(sb, region=region)


@pytest.mark.parametrize("layout", ["p4d.24xlarge:2:on-demand", "trn1.32xlarge:2:spot"])
def test_multi_card_ec2_launch_in_the_default_vpc_is_refused_naming_the_fix(sandbox_env, tmp_path, layout):
    spec = CONFIGS / ("vit-base-trn1.yaml" if layout.startswith("trn1") else "vit-base-g5.yaml")
    err = one_line_error(dry_run(sandbox_env, tmp_path, str(spec), "--platform", "ec2", "--layout", layout))
    assert "network cards" in err and "no public IPv4" in err and "NAT" in err and "create-vpc-endpoint" in err
    assert sandbox_env.client("ec2").describe_security_groups(
        Filters=[{"Name": "tag-key", "Values": ["trainctl:job"]}])["SecurityGroups"] == []


def _fleet_subnets(doc) -> set[str]:
    return {o["SubnetId"] for r in doc["requests"] if r["operation"] == "CreateFleet"
            for c in r["params"]["LaunchTemplateConfigs"] for o in c["Overrides"]}


def test_multi_card_ec2_launch_uses_only_subnets_behind_a_nat(sandbox_env, tmp_path):
    both_regions(add_nat, sandbox_env)
    proc = dry_run(sandbox_env, tmp_path, str(CONFIGS / "vit-base-g5.yaml"), "--platform", "ec2",
                   "--layout", "p4d.24xlarge:2:on-demand")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    ec2 = sandbox_env.client("ec2", doc["requests"][0]["region"])
    public = {s["SubnetId"] for s in ec2.describe_subnets(Filters=[{"Name": "cidr-block", "Values": [
        "172.31.240.0/24"]}])["Subnets"]}  # the NAT's own subnet: a route to the internet gateway only
    used = _fleet_subnets(doc)
    assert used and not used & public
    assert any("no public IPv4 (4 network cards)" in n for n in doc["notes"]), doc["notes"]


def test_multi_card_ec2_launch_with_the_agents_endpoints(sandbox_env, tmp_path):
    for region in ("us-east-1", "us-west-2"):
        add_endpoints(sandbox_env, ("ec2",), region=region)  # CloudWatch Logs missing
    err = one_line_error(dry_run(sandbox_env, tmp_path, str(CONFIGS / "vit-base-g5.yaml"), "--platform", "ec2",
                                 "--layout", "p4d.24xlarge:2:on-demand"))
    assert "lacks an interface endpoint for logs:" in err
    for region in ("us-east-1", "us-west-2"):
        add_endpoints(sandbox_env, ("logs",), s3=False, region=region)
    # the bundled job's requirements.txt needs PyPI, which endpoints do not reach (test_ec2_pip_reach.py)
    proc = dry_run(sandbox_env, tmp_path, _without_requirements(tmp_path), "--platform", "ec2",
                   "--layout", "p4d.24xlarge:2:on-demand")
    assert proc.returncode == 0, proc.stderr


def _without_requirements(tmp_path) -> str:
    """The own-script example (it ships no requirements.txt), allowed on EC2."""
    example = CONFIGS.parent / "examples" / "own-script"
    src = tmp_path / "own"
    src.mkdir(exist_ok=True)
    (src / "train.py").write_text((example / "train.py").read_text())
    spec = tmp_path / "own.yaml"
    spec.write_text((example / "job.yaml").read_text().replace("platforms: [sagemaker]", "platforms: [sagemaker, ec2]")
                    .replace("source_dir: .", "source_dir: own"))
    return str(spec)


def _p4d_spec(tmp_path):
    spec = tmp_path / "p4d.yaml"
    text = (CONFIGS / "vit-base-g5.yaml").read_text()
    spec.write_text(text.replace("  families: [g5]\n", "  families: [p4d]\n").replace(
        "    - g5.12xlarge:1:on-demand\n    - g5.2xlarge:4:spot\n    - g5.4xlarge:4:spot\n",
        "    - p4d.24xlarge:2:on-demand\n"))
    return str(spec)


def _node_check(sb, tmp_path) -> dict:
    proc = run_cli(["--output", "json", "doctor", _p4d_spec(tmp_path), "--platform", "ec2"], tmp_path / "home",
                   env=sb.env)
    return next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "EC2 nodes reach AWS")


def test_doctor_checks_the_multi_card_route_with_launch_s_code(sandbox_env, tmp_path):
    check = _node_check(sandbox_env, tmp_path)
    assert check["status"] == "fail" and "network cards" in check["detail"] and "NAT" in check["fix"]
    both_regions(add_nat, sandbox_env)
    check = _node_check(sandbox_env, tmp_path)
    assert check["status"] == "pass" and "no public IPv4" in check["detail"]


@pytest.mark.parametrize("platform_args", [["--platform", "ec2", "--layout", "g5.12xlarge:2:spot"], []])
def test_the_job_group_allows_all_traffic_out_to_itself(sm, tmp_path, platform_args):
    spec = str(CONFIGS / "vit-base-g5.yaml") if platform_args else TINY_SM
    proc = dry_run(sm, tmp_path, spec, *platform_args)
    assert proc.returncode == 0, proc.stderr
    ops = {r["operation"]: r["params"] for r in json.loads(proc.stdout)["requests"]}
    (rule,) = ops["AuthorizeSecurityGroupEgress"]["IpPermissions"]
    assert rule["IpProtocol"] == "-1" and "IpRanges" not in rule
    assert [p["GroupId"] for p in rule["UserIdGroupPairs"]] == [ops["AuthorizeSecurityGroupIngress"]["GroupId"]]


def test_sagemaker_job_of_several_nodes_with_requirements_needs_a_nat(sandbox_env, tmp_path):
    err = one_line_error(dry_run(sandbox_env, tmp_path, TINY_SM))
    assert "no NAT route" in err and "InstallRequirementsError" in err and "pip install -t" in err
    add_endpoints(sandbox_env, ())  # S3 is not enough for pip
    err = one_line_error(dry_run(sandbox_env, tmp_path, TINY_SM))
    assert "requirements.txt" in err


def test_sagemaker_job_without_requirements_needs_s3(sandbox_env, tmp_path):
    src = tmp_path / "proj"
    src.mkdir()
    (src / "train.py").write_text("print('trainctl step=1 loss=1.0 samples_per_s=10.0')\n")
    spec = tmp_path / "user.yaml"
    spec.write_text(open(TINY_SM).read().replace("  bundled: ddp\n", "  script: train.py\n  source_dir: proj\n"))
    err = one_line_error(dry_run(sandbox_env, tmp_path, str(spec)))
    assert "cannot download its code" in err and "com.amazonaws.us-east-1.s3" in err
    add_endpoints(sandbox_env, ())
    proc = dry_run(sandbox_env, tmp_path, str(spec))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["requests"][-1]["params"]["VpcConfig"]["Subnets"]


def test_single_node_sagemaker_job_uses_no_vpc(sandbox_env, tmp_path):
    proc = dry_run(sandbox_env, tmp_path, TINY_SM, "--layout", "g5.xlarge:1:spot")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    create = doc["requests"][-1]["params"]
    assert "VpcConfig" not in create
    assert not {"CreateSecurityGroup", "AuthorizeSecurityGroupIngress"} & {r["operation"] for r in doc["requests"]}


# ----------------------------------------------------------------------------- the sandbox enforces them
def _create_job(sb, name: str, instance_type: str, count: int, groups: list[str], subnet: str,
                code_files: dict[str, str]) -> None:
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for fname, text in code_files.items():
            data = text.encode()
            info = tarfile.TarInfo(fname)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    bucket = "trainctl-123456789012-us-east-1"
    sb.client("s3").put_object(Bucket=bucket, Key=f"{name}/sourcedir.tar.gz", Body=buf.getvalue())
    sb.client("sagemaker").create_training_job(
        TrainingJobName=name, RoleArn="arn:aws:iam::123456789012:role/trainctl-sagemaker-execution",
        AlgorithmSpecification={"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3-cpu-py311",
                                "TrainingInputMode": "File"},
        HyperParameters={"sagemaker_program": '"train.py"',
                         "sagemaker_submit_directory": f'"s3://{bucket}/{name}/sourcedir.tar.gz"'},
        OutputDataConfig={"S3OutputPath": f"s3://{bucket}/out"},
        ResourceConfig={"InstanceType": instance_type, "InstanceCount": count, "VolumeSizeInGB": 50},
        VpcConfig={"SecurityGroupIds": groups, "Subnets": [subnet]},
        StoppingCondition={"MaxRuntimeInSeconds": 600})


@pytest.mark.timeout(120)
def test_sandbox_vpc_job_without_s3_route_fails_at_the_download(sandbox):
    _create_job(sandbox, "no-s3", "ml.g5.xlarge", 2, [job_group(sandbox, True)], first_subnet(sandbox),
                {"train.py": TRAIN})
    d = wait_ended(sandbox, "no-s3")
    assert d["TrainingJobStatus"] == "Failed" and "ConnectTimeoutError" in d["FailureReason"], d.get("FailureReason")


@pytest.mark.timeout(120)
def test_sandbox_vpc_job_with_requirements_but_no_nat_fails_installing_them(sandbox):
    add_endpoints(sandbox, ())
    _create_job(sandbox, "no-pip", "ml.g5.xlarge", 2, [job_group(sandbox, True)], first_subnet(sandbox),
                {"train.py": TRAIN, "requirements.txt": "# deps\ntimm>=1.0,<2\n"})
    d = wait_ended(sandbox, "no-pip")
    assert d["TrainingJobStatus"] == "Failed"
    assert d["FailureReason"].startswith("AlgorithmError: InstallRequirementsError:") and "timm" in d["FailureReason"]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("egress", [False, True])
def test_sandbox_efa_job_needs_the_group_s_egress_to_itself(sandbox, egress):
    add_nat(sandbox)
    name = f"efa-{str(egress).lower()}"
    _create_job(sandbox, name, "ml.p4d.24xlarge", 2, [job_group(sandbox, egress)], first_subnet(sandbox),
                {"train.py": TRAIN})
    d = wait_ended(sandbox, name)
    if egress:
        assert d["TrainingJobStatus"] == "Completed", d.get("FailureReason")
    else:
        assert d["TrainingJobStatus"] == "Failed" and "NCCL error" in d["FailureReason"]


def _fleet(sb, job: str, cards: int) -> list[str]:
    """A fleet as a launch without the subnet check made it: the default VPC's public subnet in us-east-1a."""
    ec2 = sb.client("ec2")
    subnet = next(s["SubnetId"] for s in ec2.describe_subnets(Filters=[
        {"Name": "availability-zone", "Values": ["us-east-1a"]}, {"Name": "default-for-az", "Values": ["true"]}])[
        "Subnets"])
    nics = [{"NetworkCardIndex": c, "DeviceIndex": 0 if c == 0 else 1, "InterfaceType": "efa",
             "DeleteOnTermination": True} for c in range(cards)]
    ec2.create_launch_template(LaunchTemplateName=job, LaunchTemplateData={
        "ImageId": "resolve:ssm:/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.7-ubuntu-22.04/"
                   "latest/ami-id", "InstanceType": "p4d.24xlarge", "NetworkInterfaces": nics})
    out = ec2.create_fleet(Type="instant", LaunchTemplateConfigs=[{
        "LaunchTemplateSpecification": {"LaunchTemplateName": job, "Version": "$Latest"},
        "Overrides": [{"InstanceType": "p4d.24xlarge", "SubnetId": subnet}]}],
        TargetCapacitySpecification={"TotalTargetCapacity": 2, "DefaultTargetCapacityType": "on-demand"},
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "trainctl:job", "Value": job}]}])
    return [i for group in out["Instances"] for i in group["InstanceIds"]]


def test_sandbox_multi_card_nodes_get_no_public_ip_and_never_check_in(sandbox_env, tmp_path):
    ids = _fleet(sandbox_env, "old-multi", cards=4)
    ec2, logs = sandbox_env.client("ec2"), sandbox_env.client("logs")
    found = [i for r in ec2.describe_instances(InstanceIds=ids)["Reservations"] for i in r["Instances"]]
    assert len(found) == 2 and not any(i.get("PublicIpAddress") for i in found)
    assert logs.describe_log_groups(logGroupNamePrefix="/trainctl/old-multi")["logGroups"] == []
    env = {**sandbox_env.env, "TRAINCTL_CHECKIN_GRACE_S": "0"}
    proc = run_cli(["--output", "json", "watch", "old-multi", "--platform", "ec2", "--region", "us-east-1", "--once"],
                   tmp_path / "home", env=env)
    doc = json.loads(proc.stdout)
    assert doc["status"] == "InProgress" and all(i in doc["never_checked_in"] for i in ids), proc.stderr
    assert "NAT" in doc["never_checked_in"] and "trainctl down old-multi" in doc["never_checked_in"]
    text = run_cli(["watch", "old-multi", "--platform", "ec2", "--region", "us-east-1", "--once"],
                   tmp_path / "home", env=env)
    assert "never checked in" in text.stdout


def test_sandbox_single_card_nodes_in_the_default_vpc_check_in(sandbox_env, tmp_path):
    ids = _fleet(sandbox_env, "one-card", cards=1)
    found = [i for r in sandbox_env.client("ec2").describe_instances(InstanceIds=ids)["Reservations"]
             for i in r["Instances"]]
    assert all(i.get("PublicIpAddress") for i in found)
    streams = sandbox_env.client("logs").describe_log_streams(logGroupName="/trainctl/one-card")["logStreams"]
    assert sorted(s["logStreamName"] for s in streams) == sorted(ids)
    env = {**sandbox_env.env, "TRAINCTL_CHECKIN_GRACE_S": "0"}
    doc = json.loads(run_cli(["--output", "json", "watch", "one-card", "--platform", "ec2", "--region", "us-east-1",
                              "--once"], tmp_path / "home", env=env).stdout)
    assert doc["never_checked_in"] is None


def test_multi_card_launch_behind_endpoints_checks_in(sandbox_env, tmp_path):
    for region in ("us-east-1", "us-west-2"):
        add_endpoints(sandbox_env, region=region)
    home = tmp_path / "home"
    proc = run_cli(["--output", "json", "launch", _without_requirements(tmp_path), "--platform", "ec2",
                    "--layout", "p4d.24xlarge:2:on-demand", "--yes"], home, env=sandbox_env.env)
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)["job_id"]
    env = {**sandbox_env.env, "TRAINCTL_CHECKIN_GRACE_S": "0"}
    doc = json.loads(run_cli(["--output", "json", "watch", job, "--once"], home, env=env).stdout)
    assert len(doc["hosts"]) == 2 and doc["never_checked_in"] is None
    assert run_cli(["down", job], home, env=sandbox_env.env).returncode == 0
