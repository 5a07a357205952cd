"""As a user and a node meet them, against the sandbox: another account's bucket under
trainctl's name is refused by the CLI and the node; the node role is bounded and scoped to its job; code is
content-addressed and checked; secrets reach the job by ARN only."""
from __future__ import annotations

import hashlib
import json

import pytest
from botocore.exceptions import ClientError

from tests.support.helpers import run_cli
from tests.support.policy_eval import Request, decide
from tests.support.node_agent_helpers import FakeImds, code_tarball
from tests.support.ec2_jobs import SPEC as EC2_SPEC
from tests.support.ec2_jobs import option, settings
from trainctl_sandbox.testing import add_nat
from trainctl.aws import clients as aws
from trainctl.naming.bucket import code_key
from trainctl.backends.ec2 import Ec2Backend
from trainctl.errors import TrainctlError
from trainctl.iam.boundary import boundary_policy
from trainctl.spec import load_spec

ME, THEM = "123456789012", "999988887777"
BUCKET = f"trainctl-{ME}-us-east-1"
SM_SPEC = "tests/support/launch_specs/tiny-vit-sagemaker.yaml"


def as_account(sb, account: str):
    """A sandbox S3 client of its own (the sandbox caches clients by their config) acting as another account
    (moto's x-moto-account-id header)."""
    client = sb.client("s3", user_agent_extra=f"account-{account}")
    client.meta.events.register("before-sign.s3.*", lambda request, **_: request.headers.__setitem__(
        "x-moto-account-id", account))
    return client


@pytest.fixture
def squat():
    """Another account creates trainctl's predictable bucket name first (given back afterwards: bucket names
    are global, and a reset of the sandbox does not reach other accounts)."""
    made = []

    def make(sb) -> None:
        sb.client("s3").delete_bucket(Bucket=BUCKET)
        as_account(sb, THEM).create_bucket(Bucket=BUCKET)
        made.append(sb)

    yield make
    for sb in made:
        theirs = as_account(sb, THEM)
        for o in theirs.list_objects_v2(Bucket=BUCKET).get("Contents", []):
            theirs.delete_object(Bucket=BUCKET, Key=o["Key"])
        theirs.delete_bucket(Bucket=BUCKET)
        sb.client("s3").create_bucket(Bucket=BUCKET)


@pytest.fixture
def ec2_env(sandbox_env, tmp_path):
    aws.reset_session()
    path = tmp_path / "job.yaml"
    path.write_text(EC2_SPEC)
    add_nat(sandbox_env)  # the default option (p4d) has several network cards: its nodes reach AWS through a NAT
    yield sandbox_env, path
    aws.reset_session()


# ---------------------------------------------------------------- 2. the bucket's owner
def test_a_bucket_another_account_created_under_trainctls_name_is_refused(sandbox, tmp_path, squat):
    squat(sandbox)
    with pytest.raises(ClientError) as e:  # S3's bucket owner condition, which the sandbox enforces
        sandbox.client("s3").head_bucket(Bucket=BUCKET, ExpectedBucketOwner=ME)
    assert e.value.response["Error"]["Code"] in ("403", "AccessDenied")
    for args in (["launch", SM_SPEC, "--yes", "--layout", "g5.xlarge:1:on-demand"],
                 ["launch", SM_SPEC, "--dry-run", "--platform", "ec2", "--layout", "g5.xlarge:1:on-demand"]):
        proc = run_cli(args, tmp_path / "home", env=sandbox.env, timeout=200)
        assert proc.returncode != 0, proc.stdout
        assert len(proc.stderr.strip().splitlines()) == 1 and BUCKET in proc.stderr and ME in proc.stderr
    theirs = as_account(sandbox, THEM).list_objects_v2(Bucket=BUCKET)
    assert theirs.get("KeyCount", 0) == 0  # nothing of the job reached their bucket


def test_every_s3_call_of_a_launch_names_the_owner(ec2_env):
    sb, path = ec2_env
    sb.client("s3").delete_bucket(Bucket=BUCKET)  # the first launch: the bucket's set-up calls too
    request = Ec2Backend().prepare(option(), load_spec(path), settings(str(path)))
    s3 = [c for c in request.calls if c.service == "s3" and c.operation != "CreateBucket"]
    assert len(s3) >= 4 and all(c.params["ExpectedBucketOwner"] == ME for c in s3)


# ---------------------------------------------------------------- 1, 3, 4. the node role and the code
def test_the_node_role_carries_the_boundary_and_writes_only_its_job(ec2_env):
    sb, path = ec2_env
    spec = load_spec(path)
    backend = Ec2Backend()
    request = backend.prepare(option("g5.xlarge", 1, "on-demand"), spec, settings(str(path)))
    calls = {c.operation: c for c in request.calls}
    boundary = f"arn:aws:iam::{ME}:policy/trainctl-boundary"
    assert calls["CreateRole"].params["PermissionsBoundary"] == boundary
    upload = next(c.params for c in request.calls if c.operation == "PutObject" and "/code/" in c.params["Key"])
    sha = upload["Metadata"]["sha256"]
    assert upload["Key"] == code_key(sha) and upload["ChecksumSHA256"]
    policy = json.loads(calls["PutRolePolicy"].params["PolicyDocument"])

    def put(key: str) -> str:
        return decide(Request("s3:PutObject", f"arn:aws:s3:::{BUCKET}/{key}", {"s3:ResourceAccount": ME,
                                                                               "aws:PrincipalAccount": ME}),
                      [policy], boundary_policy())

    assert put("job-1/checkpoints/step-1.pt") == "Allow"
    assert put("job-2/checkpoints/step-1.pt") == "ImplicitDeny"  # another job's checkpoints
    assert put(code_key(sha)) == "ImplicitDeny"  # its own code: only the CLI writes code
    backend.submit(request)
    role = sb.client("iam").get_role(RoleName=calls["CreateRole"].params["RoleName"])["Role"]
    assert role["PermissionsBoundary"]["PermissionsBoundaryArn"] == boundary
    head = sb.client("s3").head_object(Bucket=BUCKET, Key=code_key(sha), ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == upload["ChecksumSHA256"]
    # the same code again: already there with its checksum, nothing to upload
    again = backend.prepare(option("g5.xlarge", 1, "on-demand"), spec, settings(str(path), job="job-2"))
    assert "PutObject" not in [c.operation for c in again.calls]


def test_without_the_boundary_an_ec2_launch_says_how_to_create_it(ec2_env):
    sb, path = ec2_env
    sb.client("iam").delete_policy(PolicyArn=f"arn:aws:iam::{ME}:policy/trainctl-boundary")
    with pytest.raises(TrainctlError, match="trainctl iam-policy --role boundary"):
        Ec2Backend().prepare(option(), load_spec(path), settings(str(path)))


def test_an_object_at_the_code_key_that_is_not_the_code_is_replaced_and_a_wrong_checksum_refused(ec2_env):
    sb, path = ec2_env
    request = Ec2Backend().prepare(option(), load_spec(path), settings(str(path)))
    upload = next(c for c in request.calls if c.operation == "PutObject").params
    s3 = sb.client("s3")
    with pytest.raises(ClientError, match="BadDigest"):
        s3.put_object(Bucket=BUCKET, Key=upload["Key"], Body=b"not the code", ChecksumAlgorithm="SHA256",
                      ChecksumSHA256=upload["ChecksumSHA256"])
    s3.put_object(Bucket=BUCKET, Key=upload["Key"], Body=b"not the code")  # no checksum: never trusted
    again = Ec2Backend().prepare(option(), load_spec(path), settings(str(path)))
    assert "PutObject" in [c.operation for c in again.calls]


# ---------------------------------------------------------------- the node agent
@pytest.fixture
def imds():
    server = FakeImds("i-0shutdown000000001", "10.0.0.5")
    yield server.endpoint
    server.close()


def _agent(imds_url: str, root, **cfg):
    from trainctl.bootstrap.agent import Agent
    from trainctl.bootstrap.node_io import Imds

    config = {"job_id": "job-1", "region": "us-east-1", "bucket": BUCKET, "bucket_owner": ME, "script": "train.py",
              "nnodes": 1, "nproc_per_node": 1, **cfg}
    agent = Agent(config, str(root), Imds(imds_url))
    agent.log.stopping.set()
    return agent


def test_the_node_runs_only_the_code_whose_hash_the_config_names(sandbox_env, imds, tmp_path):
    good, bad = code_tarball({"train.py": "print('mine')"}), code_tarball({"train.py": "print('theirs')"})
    sha = hashlib.sha256(good).hexdigest()
    sandbox_env.client("s3").put_object(Bucket=BUCKET, Key=code_key(sha), Body=bad)
    agent = _agent(imds, tmp_path, code_key=code_key(sha), code_sha256=sha)
    with pytest.raises(SystemExit, match="refusing"):
        agent.fetch_code()
    assert not (tmp_path / "code" / "train.py").exists()
    sandbox_env.client("s3").put_object(Bucket=BUCKET, Key=code_key(sha), Body=good)
    agent.fetch_code()
    assert (tmp_path / "code" / "train.py").read_text() == "print('mine')"


def test_the_node_refuses_a_bucket_of_another_account(sandbox_env, imds, tmp_path, squat):
    squat(sandbox_env)
    code = code_tarball({"train.py": "print('theirs')"})
    sha = hashlib.sha256(code).hexdigest()
    as_account(sandbox_env, THEM).put_object(Bucket=BUCKET, Key=code_key(sha), Body=code)
    agent = _agent(imds, tmp_path, code_key=code_key(sha), code_sha256=sha)
    with pytest.raises(ClientError):
        agent.fetch_code()
    with pytest.raises(ClientError):
        agent.put_marker("completed", "x")


# ---------------------------------------------------------------- 5. secrets
SECRET_SPEC = EC2_SPEC + """\
secrets:
  HF_TOKEN: arn:aws:ssm:us-east-1:123456789012:parameter/trainctl/ec2-test/hf-token
  DB_PASSWORD: arn:aws:secretsmanager:us-east-1:123456789012:secret:trainctl/ec2-test/db-AbCdEf
"""


def test_secrets_reach_the_job_by_arn_only(sandbox_env, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(SECRET_SPEC)
    out = run_cli(["-o", "json", "launch", str(path), "--dry-run", "--platform", "ec2", "--layout",
                   "g5.xlarge:1:on-demand"], tmp_path / "home", env=sandbox_env.env)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    calls = {r["operation"]: r for r in doc["requests"]}
    policy = json.loads(calls["PutRolePolicy"]["params"]["PolicyDocument"])
    granted = [st["Resource"] for st in policy["Statement"] if st["Action"] in ("ssm:GetParameter",
                                                                                "secretsmanager:GetSecretValue")]
    assert granted == [["arn:aws:ssm:us-east-1:123456789012:parameter/trainctl/ec2-test/hf-token"],
                       ["arn:aws:secretsmanager:us-east-1:123456789012:secret:trainctl/ec2-test/db-AbCdEf"]]
    # the role carries its spec's name: the boundary reads the spec's secrets by it (iam/boundary.py)
    assert {"Key": "trainctl:spec", "Value": "ec2-test"} in calls["CreateRole"]["params"]["Tags"]
    sm = run_cli(["-o", "json", "launch", str(path), "--dry-run", "--platform", "sagemaker", "--layout",
                  "g5.xlarge:1:on-demand"], tmp_path / "home", env=sandbox_env.env)
    create = next(r for r in json.loads(sm.stdout)["requests"] if r["operation"] == "CreateTrainingJob")["params"]
    assert create["Environment"]["TRAINCTL_SECRET_ARN_HF_TOKEN"].endswith(":parameter/trainctl/ec2-test/hf-token")
    role = next(r for r in json.loads(sm.stdout)["requests"] if r["operation"] == "CreateRole")["params"]
    assert {"Key": "trainctl:spec", "Value": "ec2-test"} in role["Tags"]
    assert "hf-token" not in json.dumps(create["HyperParameters"])


def test_the_node_and_the_container_read_the_secrets_at_start(sandbox_env, monkeypatch):
    import sys

    from trainctl.bootstrap.node_io import read_secrets

    ssm, sm = sandbox_env.client("ssm"), sandbox_env.client("secretsmanager")
    ssm.put_parameter(Name="/trainctl/hf-token", Value="hf-value", Type="SecureString")
    arn = sm.create_secret(Name="trainctl/db", SecretString="db-value")["ARN"]
    wanted = {"HF_TOKEN": f"arn:aws:ssm:us-east-1:{ME}:parameter/trainctl/hf-token", "DB_PASSWORD": arn}
    assert read_secrets(lambda service: sandbox_env.client(service), wanted) == {"HF_TOKEN": "hf-value",
                                                                                "DB_PASSWORD": "db-value"}
    monkeypatch.syspath_prepend(str(__import__("trainctl.entrypoints", fromlist=["x"]).__path__[0]))
    sys.modules.pop("trainctl_secrets", None)
    from trainctl_secrets import load_secrets

    env = {f"TRAINCTL_SECRET_ARN_{k}": v for k, v in wanted.items()}
    assert load_secrets(env, client=lambda service, region_name: sandbox_env.client(service, region_name)) == [
        "DB_PASSWORD", "HF_TOKEN"]
    assert env["HF_TOKEN"] == "hf-value" and env["DB_PASSWORD"] == "db-value"


def test_the_spec_loader_warns_about_an_argument_that_looks_like_a_secret(tmp_path):
    path = tmp_path / "job.yaml"
    (tmp_path / "train.py").write_text("print('hi')\n")
    path.write_text(EC2_SPEC.replace("{bundled: ddp, args: {model: vit_micro, batch-size: 8, steps: 20, device: cpu, "
                                     "bf16: false}}", "{script: train.py, source_dir: ., args: {steps: 20, "
                                     "hf-token: hf_abcdefghijklmnopqrstuvwxyz0123456789}}"))
    assert "hf-token" in path.read_text()
    proc = run_cli(["plan", str(path), "--offline"], tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    assert "entrypoint.args.hf-token looks like a secret" in proc.stderr and "secrets:" in proc.stderr
    plain = run_cli(["plan", str(tmp_path / "ok.yaml"), "--offline"], tmp_path / "home") if (
        tmp_path / "ok.yaml").write_text(EC2_SPEC) else None
    assert plain.returncode == 0 and "looks like a secret" not in plain.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(EC2_SPEC + "secrets: {HF_TOKEN: arn:aws:ssm:us-east-1:123456789012:parameter/prod/db}\n")
    refused = run_cli(["plan", str(bad), "--offline"], tmp_path / "home")
    assert refused.returncode == 2 and "secrets" in refused.stderr
