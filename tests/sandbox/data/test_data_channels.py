"""A job's own data and outputs (spec `data:`): each channel reaches the launch's requests on SageMaker and on EC2,
and a channel that would fail after billing (another region, an empty prefix, an FSx file system that does not
exist) is refused at launch in one line, before anything is created. The training jobs that read their channels
and fetch their model are in tests/slow/test_data_channels_jobs.py."""
from __future__ import annotations

import json
import os

import pytest
from botocore.exceptions import ClientError

from tests.support.data_jobs import FILES, cli, dataset, project
from tests.support.helpers import run_cli
from trainctl_sandbox.testing import admit_data_buckets


def _dry_run(sb, home, spec, platform="sagemaker", *extra):
    return cli(sb, home, "-o", "json", "launch", spec, "--platform", platform, "--dry-run", *extra)


def test_the_launch_sends_each_channel_as_sagemaker_input_data_and_tensorboard_output(sandbox_env, tmp_path):
    dataset(sandbox_env)
    spec = project(tmp_path, "{train: s3://my-datasets/shards/, extra: {uri: 's3://my-datasets/shards/', "
                              "mode: stream, bytes_per_sample: 100000}, parts: {uri: 's3://my-datasets/shards/', "
                              "mode: sharded}}")
    _the_ec2_launch_caps_mount_s3_as_the_plan_says(sandbox_env, tmp_path / "home", spec)
    proc = _dry_run(sandbox_env, tmp_path / "home", spec)
    assert proc.returncode == 0, proc.stderr
    (create,) = [r["params"] for r in json.loads(proc.stdout)["requests"] if r["operation"] == "CreateTrainingJob"]
    channels = {c["ChannelName"]: c for c in create["InputDataConfig"]}
    assert channels["train"] == {"ChannelName": "train", "InputMode": "File", "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": "s3://my-datasets/shards/", "S3DataDistributionType": "FullyReplicated"}}}
    assert channels["extra"]["InputMode"] == "FastFile"
    assert channels["parts"]["DataSource"]["S3DataSource"]["S3DataDistributionType"] == "ShardedByS3Key"
    job = create["TrainingJobName"]
    assert create["TensorBoardOutputConfig"] == {"LocalPath": "/opt/ml/output/tensorboard",
                                                 "S3OutputPath": f"s3://trainctl-123456789012-us-east-1/{job}/tensorboard"}
    (policy,) = [json.loads(r["params"]["PolicyDocument"]) for r in json.loads(proc.stdout)["requests"]
                 if r["operation"] == "PutRolePolicy"]
    reads = {(s["Action"], json.dumps(s["Resource"])) for s in policy["Statement"] if s["Sid"].startswith("ReadData")}
    assert ("s3:GetObject", '"arn:aws:s3:::my-datasets/shards/*"') in reads
    assert ("s3:ListBucket", '"arn:aws:s3:::my-datasets"') in reads


def _the_ec2_launch_caps_mount_s3_as_the_plan_says(sb, home, spec) -> None:
    """The stream channel's mount-s3 cap in the node agent's config is the plan's (the link's baseline less the
    gradients' share), and the dry run says it."""
    import base64

    proc = _dry_run(sb, home, spec, "ec2")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    (template,) = [r["params"] for r in doc["requests"] if r["operation"] == "CreateLaunchTemplate"]
    user_data = base64.b64decode(template["LaunchTemplateData"]["UserData"]).decode()
    config = json.loads(user_data.split("<<'TRAINCTL_CONFIG'\n", 1)[1].split("\nTRAINCTL_CONFIG", 1)[0])
    cap = doc["option"]["data"]["stream_cap_gbps"]
    assert isinstance(cap, int) and cap >= 1
    assert config["channels"]["extra"] == {"bucket": "my-datasets", "prefix": "shards/", "mode": "stream",
                                           "max_gbps": cap}
    assert "max_gbps" not in config["channels"]["train"] and "max_gbps" not in config["channels"]["parts"]
    assert f"channel extra: mount-s3 --maximum-throughput-gbps {cap} per node" in json.dumps(doc)


def test_a_bucket_in_another_region_is_refused_unless_allowed_on_ec2_and_always_on_sagemaker(sandbox_env, tmp_path):
    dataset(sandbox_env, bucket="far-datasets", region="us-west-2")
    spec, home = project(tmp_path, "{train: s3://far-datasets/shards/}"), tmp_path / "home"
    for platform in ("sagemaker", "ec2"):
        proc = _dry_run(sandbox_env, home, spec, platform)
        assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "far-datasets" in proc.stderr and "us-west-2" in proc.stderr and "--allow-cross-region-data" in proc.stderr
    allowed = _dry_run(sandbox_env, home, spec, "ec2", "--allow-cross-region-data")
    assert allowed.returncode == 0, allowed.stderr
    # SageMaker reads input only from its own region (S3DataSource.S3Uri): the flag is EC2's
    refused = _dry_run(sandbox_env, home, spec, "sagemaker", "--allow-cross-region-data")
    assert refused.returncode != 0 and "ec2" in refused.stderr, refused.stderr


def test_an_empty_prefix_and_a_missing_bucket_are_refused_before_anything_is_created(sandbox_env, tmp_path):
    dataset(sandbox_env)
    home = tmp_path / "home"
    for data, words in (("{train: s3://my-datasets/nothing-here/}", "no objects under the prefix"),
                        ("{train: s3://no-such-datasets/x/}", "does not exist")):
        proc = cli(sandbox_env, home, "launch", project(tmp_path / data[-12:-2], data), "--yes")
        assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert words in proc.stderr, proc.stderr
    assert sandbox_env.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []


@pytest.mark.parametrize("platform", ["sagemaker", "ec2"])
def test_a_bucket_the_boundary_does_not_admit_is_refused_before_anything_is_created(sandbox_env, tmp_path, platform):
    """The job's role carries trainctl's permissions boundary, which admits a data bucket only once an
    administrator names it: without that the job would start, be billed and fail reading its data."""
    dataset(sandbox_env)
    sandbox_env.client("iam").set_default_policy_version(  # the boundary as first created: no data bucket
        PolicyArn="arn:aws:iam::123456789012:policy/trainctl-boundary", VersionId="v1")
    home, spec = tmp_path / "home", project(tmp_path, "{train: s3://my-datasets/shards/}")
    refused = cli(sandbox_env, home, "launch", spec, "--platform", platform, "--yes")
    assert refused.returncode != 0 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "does not let the job's role read bucket my-datasets" in refused.stderr, refused.stderr
    assert "--data-bucket my-datasets" in refused.stderr and "create-policy-version" in refused.stderr
    assert sandbox_env.client("iam").list_roles(PathPrefix="/trainctl/")["Roles"] == []
    assert sandbox_env.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []
    # the dry run runs the launch's checks: it refuses the same way, in the same one line (issue 35)
    dry = _dry_run(sandbox_env, home, spec, platform)
    assert dry.returncode == refused.returncode and dry.stderr == refused.stderr, dry.stderr
    if platform == "ec2":  # doctor SPEC says the same before any launch
        doctor = cli(sandbox_env, home, "-o", "json", "doctor", spec)
        check = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}["data boundary"]
        assert check["status"] == "fail" and "--data-bucket my-datasets" in json.dumps(check), check
    admit_data_buckets(sandbox_env, "my-datasets")
    admitted = _dry_run(sandbox_env, home, spec, platform)
    assert admitted.returncode == 0, admitted.stderr
    assert "the boundary lets the job's role read s3://my-datasets" in json.loads(admitted.stdout)["notes"]


@pytest.mark.parametrize("platform", ["sagemaker", "ec2"])
def test_a_bucket_encrypted_with_the_user_s_kms_key_gives_the_role_decrypt_through_s3_only(sandbox_env, tmp_path,
                                                                                          platform):
    """SSE-KMS with a customer managed key: reading an object needs kms:Decrypt on the key, so the job's role gets
    it on exactly that key and only through S3."""
    dataset(sandbox_env)
    key = sandbox_env.client("kms").create_key(Description="datasets")["KeyMetadata"]
    sandbox_env.client("s3").put_bucket_encryption(Bucket="my-datasets", ServerSideEncryptionConfiguration={
        "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key["KeyId"]}}]})
    proc = _dry_run(sandbox_env, tmp_path / "home", project(tmp_path, "{train: s3://my-datasets/shards/}"), platform)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    (put,) = [r["params"] for r in doc["requests"] if r["operation"] == "PutRolePolicy"]
    decrypt = [st for st in json.loads(put["PolicyDocument"])["Statement"] if st["Sid"] == "DecryptData"]
    assert decrypt == [{"Sid": "DecryptData", "Effect": "Allow", "Action": "kms:Decrypt", "Resource": [key["Arn"]],
                        "Condition": {"StringEquals": {"kms:ViaService": "s3.us-east-1.amazonaws.com"}}}]
    assert any(n.startswith(f"s3://my-datasets: SSE-KMS with {key['Arn']}") for n in doc["notes"]), doc["notes"]


def test_an_fsx_file_system_that_does_not_exist_is_refused_at_launch_and_by_the_sandbox(sm, sandbox_env, tmp_path):
    # one node reaching FSx runs in the VPC, where the code download needs S3 (`sm` adds a NAT)
    spec = project(tmp_path, "{train: {fsx: fs-0123456789abcdef0, path: /fsx/data}}")
    proc = _dry_run(sandbox_env, tmp_path / "home", spec)
    assert proc.returncode != 0 and "fs-0123456789abcdef0" in proc.stderr and "no such FSx" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    doctor = cli(sandbox_env, tmp_path / "home", "-o", "json", "doctor", spec)
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["data train"]["status"] == "fail"
    sm = sandbox_env.client("sagemaker")
    request = _minimal_job("fsx-missing", {"FileSystemDataSource": {
        "FileSystemId": "fs-0123456789abcdef0", "FileSystemType": "FSxLustre", "FileSystemAccessMode": "ro",
        "DirectoryPath": "/fsx/data"}})
    with pytest.raises(ClientError) as err:
        sm.create_training_job(**request)
    assert err.value.response["Error"]["Code"] == "ValidationException"
    assert "fs-0123456789abcdef0" in err.value.response["Error"]["Message"]


def test_the_sandbox_refuses_an_input_data_config_that_breaks_the_api_model(sandbox_env):
    sm = sandbox_env.client("sagemaker")
    request = _minimal_job("bad-channel", {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://my-datasets/x/",
                                                            "S3DataDistributionType": "EveryOther"}})
    with pytest.raises(ClientError) as err:
        sm.create_training_job(**request)
    assert err.value.response["Error"]["Code"] == "ValidationException"
    assert "EveryOther" in err.value.response["Error"]["Message"]


def _minimal_job(name: str, source: dict) -> dict:
    return {"TrainingJobName": name, "RoleArn": "arn:aws:iam::123456789012:role/nobody",
            "AlgorithmSpecification": {"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/x:1",
                                       "TrainingInputMode": "File"},
            "InputDataConfig": [{"ChannelName": "train", "DataSource": source}],
            "OutputDataConfig": {"S3OutputPath": "s3://my-datasets/out"},
            "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
            "StoppingCondition": {"MaxRuntimeInSeconds": 600}}


def test_each_node_copies_its_share_of_a_sharded_channel_and_a_stream_without_mount_s3_is_copied(sandbox_env,
                                                                                                 tmp_path):
    """The EC2 agent's channel fetch (bootstrap/channels.py) against the sandbox's S3: two ranks of a sharded
    channel get disjoint shares that together are the whole prefix; `stream` on a node without mount-s3 copies
    the prefix and says so."""
    import boto3

    from trainctl.bootstrap.channels import Channels

    dataset(sandbox_env)
    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=sandbox_env.endpoint_url)
    said: list[str] = []
    shares = []
    for rank in (0, 1):
        ml = tmp_path / f"node{rank}" / "ml"
        Channels(s3, {"train": {"bucket": "my-datasets", "prefix": "shards/", "mode": "sharded"}}, str(ml),
                 said.append).prepare(rank, 2)
        shares.append({p.name for p in (ml / "input" / "data" / "train").iterdir()})
    assert not shares[0] & shares[1] and len(shares[0] | shares[1]) == FILES and len(shares[0]) == FILES // 2
    assert any("shard 2 of 2" in line for line in said)
    # the script tells a sharded channel as on SageMaker: inputdataconfig.json, and the toolkit's two variables
    sharded = {"train": {"TrainingInputMode": "File", "S3DistributionType": "ShardedByS3Key",
                         "RecordWrapperType": "None"}}
    assert json.loads((ml / "input" / "config" / "inputdataconfig.json").read_text()) == sharded
    ml = tmp_path / "stream" / "ml"
    channels = Channels(s3, {"train": {"bucket": "my-datasets", "prefix": "shards/", "mode": "stream"}}, str(ml),
                        said.append)
    channels.prepare(0, 1)
    assert len(list((ml / "input" / "data" / "train").iterdir())) == FILES
    assert any("no mount-s3 on this node; copying" in line for line in said)
    assert channels.env()["SM_CHANNEL_TRAIN"] == str(ml / "input" / "data" / "train")
    assert channels.env()["SM_MODEL_DIR"] == str(ml / "model")
    assert channels.env()["SM_INPUT_CONFIG_DIR"] == str(ml / "input" / "config")
    assert json.loads(channels.env()["SM_INPUT_DATA_CONFIG"])["train"]["S3DistributionType"] == "FullyReplicated"
    assert json.loads(channels.env()["SM_INPUT_DATA_CONFIG"])["train"]["TrainingInputMode"] == "FastFile"


def test_the_agent_hands_mount_s3_its_cap_as_a_whole_number_of_gbps(tmp_path, monkeypatch):
    """mount-s3 takes --maximum-throughput-gbps as an integer >= 1: a stand-in mount-s3 on the PATH records what the
    agent runs."""
    from trainctl.bootstrap.channels import mount

    tool = tmp_path / "bin" / "mount-s3"
    tool.parent.mkdir()
    tool.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path / 'argv'}\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}:{os.environ['PATH']}")
    said: list[str] = []
    assert mount({"bucket": "my-datasets", "prefix": "shards/", "max_gbps": 2.7}, str(tmp_path / "mnt"), said.append)
    assert (tmp_path / "argv").read_text().split() == [
        "--read-only", "--maximum-throughput-gbps", "2", "--prefix", "shards/", "my-datasets", str(tmp_path / "mnt")]
    assert mount({"bucket": "my-datasets", "prefix": "", "max_gbps": 0.4}, str(tmp_path / "mnt"), said.append)
    assert (tmp_path / "argv").read_text().split()[1:3] == ["--maximum-throughput-gbps", "1"]


def test_iam_policy_names_the_data_buckets_it_is_given(tmp_path):
    boundary = json.loads(run_cli(["iam-policy", "--role", "boundary", "--data-bucket", "my-datasets"], tmp_path).stdout)
    reads = [s for s in boundary["Statement"] if s["Sid"].startswith("ReadDataBucket")]
    assert {s["Action"] for s in reads} == {"s3:GetObject", "s3:ListBucket", "kms:Decrypt"}
    assert {s["Resource"] for s in reads if s["Action"] != "kms:Decrypt"} == {"arn:aws:s3:::my-datasets/*",
                                                                            "arn:aws:s3:::my-datasets"}
    (decrypt,) = [s for s in reads if s["Action"] == "kms:Decrypt"]  # SSE-KMS data, through S3 only
    assert decrypt["Condition"] == {"StringLike": {"kms:ViaService": "s3.*.amazonaws.com"}}
    plain = json.loads(run_cli(["iam-policy", "--role", "boundary"], tmp_path).stdout)
    assert not [s for s in plain["Statement"] if s["Sid"].startswith("ReadData")]
    cli = json.loads(run_cli(["iam-policy", "--data-bucket", "my-datasets"], tmp_path).stdout)
    data = [s for s in cli["Statement"] if s["Resource"] == "arn:aws:s3:::my-datasets"]
    assert data and {"s3:GetBucketLocation", "s3:ListBucket"} <= set(data[0]["Action"])


def test_an_fsx_file_system_outside_the_job_s_az_is_refused_and_one_inside_becomes_a_read_only_channel(sm, sandbox_env,
                                                                                                    tmp_path):
    ec2 = sandbox_env.client("ec2")
    subnets = {s["AvailabilityZone"]: s["SubnetId"] for s in ec2.describe_subnets(
        Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"]}
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]
    lustre = ec2.create_security_group(GroupName="lustre", Description="FSx", VpcId=vpc["VpcId"])["GroupId"]
    ec2.authorize_security_group_ingress(GroupId=lustre, IpPermissions=[  # Lustre from the VPC (SageMaker's ENIs)
        {"IpProtocol": "tcp", "FromPort": lo, "ToPort": hi, "UserIdGroupPairs": [{"GroupId": lustre}],
         "IpRanges": [{"CidrIp": vpc["CidrBlock"]}]} for lo, hi in ((988, 988), (1018, 1023))])
    fs = sandbox_env.client("fsx").create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnets["us-east-1b"]], SecurityGroupIds=[lustre],
        LustreConfiguration={"DeploymentType": "SCRATCH_1"})["FileSystem"]["FileSystemId"]  # mount name: fsx
    spec, home = project(tmp_path, f"{{train: {{fsx: {fs}, path: /fsx/data}}}}"), tmp_path / "home"
    far = _dry_run(sandbox_env, home, spec, "sagemaker", "--subnet", subnets["us-east-1a"])
    assert far.returncode != 0 and len(far.stderr.strip().splitlines()) == 1, far.stderr
    assert "us-east-1b" in far.stderr and subnets["us-east-1b"] in far.stderr, far.stderr
    near = _dry_run(sandbox_env, home, spec, "sagemaker", "--subnet", subnets["us-east-1b"])
    assert near.returncode == 0, near.stderr
    (create,) = [r["params"] for r in json.loads(near.stdout)["requests"] if r["operation"] == "CreateTrainingJob"]
    assert create["InputDataConfig"] == [{"ChannelName": "train", "InputMode": "File", "DataSource": {
        "FileSystemDataSource": {"FileSystemId": fs, "FileSystemType": "FSxLustre", "FileSystemAccessMode": "ro",
                                 "DirectoryPath": "/fsx/data"}}}]
    assert create["VpcConfig"]["Subnets"] == [subnets["us-east-1b"]]  # one node, in the file system's VPC
    # on both platforms, once its groups let the job in: the VPC's default group lets in only its own members
    closed = sandbox_env.client("fsx").create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnets["us-east-1b"]],
        LustreConfiguration={"DeploymentType": "SCRATCH_1"})["FileSystem"]["FileSystemId"]
    spec = project(tmp_path / "closed", f"{{train: {{fsx: {closed}, path: /fsx/data}}}}")
    for platform in ("ec2", "sagemaker"):
        refused = _dry_run(sandbox_env, home, spec, platform, "--subnet", subnets["us-east-1b"])
        assert refused.returncode != 0 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "let no TCP 988 and TCP 1018-1023 in" in refused.stderr, refused.stderr


def test_keys_that_cannot_be_files_are_named_at_launch_before_anything_is_created(sandbox_env, tmp_path):
    """Issue 36, item 13: `a` beside `a/b`, or a 300-character name, failed the node after it was billed, without
    naming the key; the launch now checks the listing's first page and names it."""
    dataset(sandbox_env)
    s3, home = sandbox_env.client("s3"), tmp_path / "home"
    long_name = "x" * 300
    for prefix, keys, words in (("clash/", ["clash/a", "clash/a/b"], "'clash/a'"),
                                ("long/", [f"long/{long_name}"], "longer than 255 bytes")):
        for key in keys:
            s3.put_object(Bucket="my-datasets", Key=key, Body=b"1")
        proc = _dry_run(sandbox_env, home, project(tmp_path / prefix[:-1], f"{{train: s3://my-datasets/{prefix}}}"))
        assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert words in proc.stderr and "cannot be a file on the job's hosts" in proc.stderr, proc.stderr


def test_the_node_names_a_key_that_cannot_be_a_file_before_it_copies_anything(sandbox_env, tmp_path):
    """Issue 36, item 13 (the agent's part): past the launch's first page, `a` beside `a/b` or a 300-byte name failed
    the billed node with the file system's bare error (FileExistsError, 'File name too long'), naming no key. The
    agent now checks every key of its share before it copies one and fails at once with the key's s3:// name."""
    import boto3
    import pytest

    from trainctl.bootstrap.channels import Channels

    dataset(sandbox_env)
    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=sandbox_env.endpoint_url)
    long_name = "x" * 300
    for prefix, keys, bad, words in (
            ("clash/", ["clash/0", "clash/a", "clash/a/b"], "clash/a", "another key uses it as a folder"),
            ("long/", ["long/0", f"long/{long_name}"], f"long/{long_name}", "a part of its name is longer than 255 bytes")):
        for key in keys:
            s3.put_object(Bucket="my-datasets", Key=key, Body=b"1")
        ml = tmp_path / prefix[:-1] / "ml"
        with pytest.raises(SystemExit) as failed:
            Channels(s3, {"train": {"bucket": "my-datasets", "prefix": prefix, "mode": "copy"}}, str(ml),
                     lambda line: None).prepare(0, 1)
        message = str(failed.value)
        assert f"data object s3://my-datasets/{bad} cannot be a file on this node: {words}" in message, message
        assert "\n" not in message
        assert not any((ml / "input" / "data" / "train").iterdir())  # refused before anything was copied
