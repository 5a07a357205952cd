"""trainctl's generated policies, evaluated (tests/support/policy_eval.py): the escalation path, another account's
bucket and a write into another job are denied; the calls trainctl makes are allowed."""
from __future__ import annotations

import json

import pytest

from tests.support.helpers import run_cli
from tests.support.policy_eval import Request, decide
from trainctl import iam
from trainctl.naming.bucket import code_key
from trainctl.iam.node_role import node_policy
from trainctl.iam.execution_role import execution_policy
from trainctl.iam.boundary import boundary_arn, boundary_policy

ME, THEM = "111122223333", "999988887777"
BOUNDARY = boundary_arn(ME)
CLI = [iam.cli_policy("all")]
ROLE = f"arn:aws:iam::{ME}:role/trainctl/trainctl-job-1"
BUCKET = f"trainctl-{ME}-us-east-1"
SHA, OTHER_SHA = "a" * 64, "b" * 64
SECRET = f"arn:aws:ssm:us-east-1:{ME}:parameter/trainctl/vit/hf-token"
NODE = [node_policy("job-1", BUCKET, "us-east-1", ME, code_key(SHA), (SECRET,))]
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.7.1-gpu-py312"
EXECUTION = [execution_policy("job-1", BUCKET, "us-east-1", ME, code_key(SHA), IMAGE, (SECRET,), in_vpc=True)]


def req(action: str, resource: str, **context) -> Request:
    return Request(action, resource, {"aws:PrincipalAccount": ME, **context})


def s3(action: str, key: str | None, account: str = ME, bucket: str = BUCKET, **context) -> Request:
    resource = f"arn:aws:s3:::{bucket}" + (f"/{key}" if key is not None else "")
    return req(action, resource, **{"s3:ResourceAccount": account}, **context)


# ---------------------------------------------------------------- 1. the escalation path
def test_the_cli_policy_creates_and_writes_roles_only_with_the_boundary():
    with_boundary = {"iam:PermissionsBoundary": BOUNDARY}
    assert decide(req("iam:CreateRole", ROLE, **with_boundary), CLI) == "Allow"
    assert decide(req("iam:PutRolePolicy", ROLE, **with_boundary), CLI) == "Allow"
    # the escalation: a role under /trainctl/ without the boundary (then `*:*` inline, trusting oneself)
    assert decide(req("iam:CreateRole", ROLE), CLI) == "ExplicitDeny"
    assert decide(req("iam:PutRolePolicy", ROLE), CLI) == "ExplicitDeny"
    other = {"iam:PermissionsBoundary": f"arn:aws:iam::{ME}:policy/AdministratorAccess"}
    assert decide(req("iam:CreateRole", ROLE, **other), CLI) == "ExplicitDeny"
    assert decide(req("iam:AttachRolePolicy", ROLE, **with_boundary), CLI) == "ImplicitDeny"


def test_the_boundary_cannot_be_removed_swapped_or_rewritten():
    assert decide(req("iam:DeleteRolePermissionsBoundary", ROLE, **{"iam:PermissionsBoundary": BOUNDARY}),
                  CLI) == "ExplicitDeny"
    swap = {"iam:PermissionsBoundary": f"arn:aws:iam::{ME}:policy/wide"}
    assert decide(req("iam:PutRolePermissionsBoundary", ROLE, **swap), CLI) == "ExplicitDeny"
    policy = f"arn:aws:iam::{ME}:policy/trainctl-boundary"
    for action in ("iam:CreatePolicyVersion", "iam:SetDefaultPolicyVersion", "iam:DeletePolicy", "iam:CreatePolicy"):
        assert decide(req(action, policy), CLI) == "ExplicitDeny", action
    # even next to a policy that allows everything: the denies hold
    admin = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    assert decide(req("iam:CreatePolicyVersion", policy), [*CLI, admin]) == "ExplicitDeny"
    assert decide(req("iam:CreateRole", ROLE), [*CLI, admin]) == "ExplicitDeny"


def test_a_role_with_the_boundary_and_star_policy_stays_within_the_boundary():
    star = [{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}]
    boundary = boundary_policy()
    assert decide(req("iam:CreateUser", f"arn:aws:iam::{ME}:user/evil"), star, boundary) == "ImplicitDeny"
    assert decide(req("iam:AttachRolePolicy", ROLE), star, boundary) == "ImplicitDeny"
    assert decide(s3("s3:GetObject", "k", bucket="company-data"), star, boundary) == "ImplicitDeny"
    assert decide(req("secretsmanager:GetSecretValue", f"arn:aws:secretsmanager:us-east-1:{ME}:secret:prod/db-x"),
                  star, boundary) == "ImplicitDeny"
    assert decide(s3("s3:PutObject", code_key(SHA)), star, boundary) == "ImplicitDeny"  # the code is the CLI's
    assert decide(s3("s3:PutObject", "job-1/checkpoints/step-1.pt"), star, boundary) == "Allow"


# ---------------------------------------------------------------- 2. another account's bucket
@pytest.mark.parametrize("action,key", [("s3:PutObject", code_key(SHA)), ("s3:GetObject", code_key(SHA)),
                                        ("s3:ListBucket", None), ("s3:PutBucketTagging", None)])
def test_the_cli_policy_refuses_a_bucket_another_account_owns(action, key):
    assert decide(s3(action, key), CLI) == "Allow"
    assert decide(s3(action, key, account=THEM), CLI) == "ImplicitDeny"


def test_node_and_execution_roles_refuse_a_bucket_another_account_owns():
    assert decide(s3("s3:GetObject", code_key(SHA)), NODE) == "Allow"
    assert decide(s3("s3:GetObject", code_key(SHA), account=THEM), NODE) == "ImplicitDeny"
    execution = EXECUTION
    assert decide(s3("s3:PutObject", "job-1/checkpoints/c.pt"), execution) == "Allow"
    assert decide(s3("s3:PutObject", "job-1/checkpoints/c.pt", account=THEM), execution) == "ImplicitDeny"
    for statement in iam.cli_policy("all")["Statement"]:
        if statement["Effect"] == "Allow" and any(a.startswith("s3:") and a != "s3:CreateBucket"
                                                  for a in statement["Action"]):
            assert statement["Condition"] == iam.SAME_ACCOUNT


# ---------------------------------------------------------------- 3, 4. one job's objects
def test_a_node_writes_only_its_jobs_checkpoints_logs_and_status_and_reads_its_code_by_hash():
    boundary = boundary_policy()
    for key in ("job-1/checkpoints/step-10.pt", "job-1/logs/x.log", "job-1/status/completed"):
        assert decide(s3("s3:PutObject", key), NODE, boundary) == "Allow", key
    for key in ("job-2/checkpoints/step-10.pt", "job-2/status/completed", code_key(SHA), "job-1/code/sourcedir.tar.gz",
                "job-1/other"):
        assert decide(s3("s3:PutObject", key), NODE, boundary) == "ImplicitDeny", key
    assert decide(s3("s3:GetObject", code_key(SHA)), NODE, boundary) == "Allow"
    assert decide(s3("s3:GetObject", code_key(OTHER_SHA)), NODE, boundary) == "ImplicitDeny"
    assert decide(s3("s3:GetObject", "job-2/checkpoints/step-10.pt"), NODE, boundary) == "ImplicitDeny"
    assert decide(s3("s3:ListBucket", None, **{"s3:prefix": "job-1/checkpoints/"}), NODE, boundary) == "Allow"
    assert decide(s3("s3:ListBucket", None, **{"s3:prefix": "job-2/"}), NODE, boundary) == "ImplicitDeny"
    assert decide(s3("s3:DeleteObject", "job-2/checkpoints/step-10.pt"), NODE, boundary) == "ImplicitDeny"


def test_the_sagemaker_container_never_writes_code():
    boundary = boundary_policy()
    assert decide(s3("s3:GetObject", code_key(SHA)), EXECUTION, boundary) == "Allow"
    assert decide(s3("s3:GetObject", code_key(OTHER_SHA)), EXECUTION, boundary) == "ImplicitDeny"
    for action in ("s3:PutObject", "s3:DeleteObject"):
        assert decide(s3(action, code_key(SHA)), EXECUTION, boundary) == "ImplicitDeny"
    assert decide(s3("s3:PutObject", "job-1/output/job-1/output/model.tar.gz"), EXECUTION, boundary) == "Allow"


def test_a_sagemaker_jobs_role_writes_only_its_own_prefix():
    """Each SageMaker job has its own execution role: job-1's container cannot touch job-2's objects."""
    boundary = boundary_policy()
    for action, key in (("s3:PutObject", "job-1/checkpoints/step-10.pt"), ("s3:DeleteObject", "job-1/checkpoints/a"),
                        ("s3:PutObject", "job-1/output/job-1/output/model.tar.gz"),
                        ("s3:GetObject", "job-1/checkpoints/step-10.pt")):
        assert decide(s3(action, key), EXECUTION, boundary) == "Allow", (action, key)
    for action, key in (("s3:PutObject", "job-2/checkpoints/step-10.pt"), ("s3:DeleteObject", "job-2/checkpoints/a"),
                        ("s3:PutObject", "job-2/output/job-2/output/model.tar.gz"), ("s3:GetObject", "job-2/output/m"),
                        ("s3:PutObject", "job-1/status/completed"), ("s3:PutObject", "job-1/other")):
        assert decide(s3(action, key), EXECUTION, boundary) == "ImplicitDeny", (action, key)
    assert decide(s3("s3:ListBucket", None, **{"s3:prefix": "job-1/checkpoints/"}), EXECUTION, boundary) == "Allow"
    assert decide(s3("s3:ListBucket", None, **{"s3:prefix": "job-2/"}), EXECUTION, boundary) == "ImplicitDeny"
    logs = "arn:aws:logs:us-east-1:111122223333:log-group:"
    assert decide(req("logs:PutLogEvents", f"{logs}/aws/sagemaker/TrainingJobs:log-stream:job-1/algo-1-1"),
                  EXECUTION, boundary) == "Allow"
    assert decide(req("logs:PutLogEvents", f"{logs}/trainctl/job-2:log-stream:i-1"), EXECUTION, boundary) == "ImplicitDeny"
    image = "arn:aws:ecr:us-east-1:763104351884:repository/pytorch-training"
    assert decide(req("ecr:BatchGetImage", image), EXECUTION, boundary) == "Allow"
    assert decide(req("ecr:BatchGetImage", f"{image}-other"), EXECUTION, boundary) == "ImplicitDeny"
    assert decide(req("ec2:CreateNetworkInterface", "arn:aws:ec2:us-east-1:111122223333:network-interface/*"),
                  EXECUTION, boundary) == "Allow"
    # the CLI may pass such a role, and only to SageMaker
    sm_role = f"arn:aws:iam::{ME}:role/trainctl/trainctl-job-1"
    assert decide(req("iam:PassRole", sm_role, **{"iam:PassedToService": "sagemaker.amazonaws.com"}), CLI) == "Allow"
    assert decide(req("iam:PassRole", sm_role, **{"iam:PassedToService": "lambda.amazonaws.com"}),
                  CLI) == "ImplicitDeny"


# ---------------------------------------------------------------- 5. secrets
def test_a_node_reads_exactly_its_secrets():
    boundary = boundary_policy()
    vit = {"aws:PrincipalTag/trainctl:spec": "vit"}
    assert decide(req("ssm:GetParameter", SECRET, **vit), NODE, boundary) == "Allow"
    other = f"arn:aws:ssm:us-east-1:{ME}:parameter/trainctl/vit/other"
    assert decide(req("ssm:GetParameter", other, **vit), NODE, boundary) == "ImplicitDeny"
    assert decide(req("kms:Decrypt", f"arn:aws:kms:us-east-1:{ME}:key/k", **{"kms:ViaService":
                                                                              "ssm.us-east-1.amazonaws.com"}),
                  NODE, boundary) == "Allow"
    assert decide(req("kms:Decrypt", f"arn:aws:kms:us-east-1:{ME}:key/k"), NODE, boundary) == "ImplicitDeny"
    no_secrets = [node_policy("job-1", BUCKET, "us-east-1", ME, code_key(SHA))]
    assert not any("ssm:" in json.dumps(st) for st in no_secrets[0]["Statement"])


@pytest.mark.parametrize("action,secret", [
    ("ssm:GetParameter", "arn:aws:ssm:us-east-1:{me}:parameter/trainctl/{spec}/hf-token"),
    ("secretsmanager:GetSecretValue", "arn:aws:secretsmanager:us-east-1:{me}:secret:trainctl/{spec}/db-AbCdEf")])
def test_the_boundary_lets_a_role_read_only_its_own_specs_secrets_whatever_its_policy(action, secret):
    """A CLI user can write any inline policy into a role under /trainctl/: with `*:*` a role still reads only
    the secrets of the spec its trainctl:spec tag names, and a role without the tag reads none."""
    star = [{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}]
    boundary = boundary_policy()
    mine, theirs = secret.format(me=ME, spec="vit"), secret.format(me=ME, spec="llm")
    tagged = {"aws:PrincipalTag/trainctl:spec": "vit"}
    assert decide(req(action, mine, **tagged), star, boundary) == "Allow"
    assert decide(req(action, theirs, **tagged), star, boundary) == "ImplicitDeny"
    assert decide(req(action, mine), star, boundary) == "ImplicitDeny"  # no tag: no secret
    top_level = secret.format(me=ME, spec="vit").replace("trainctl/vit/", "trainctl/")
    assert decide(req(action, top_level, **tagged), star, boundary) == "ImplicitDeny"


def test_a_node_decrypts_its_data_key_through_s3_only_once_the_boundary_admits_the_bucket():
    key = f"arn:aws:kms:us-east-1:{ME}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    node = [node_policy("job-1", BUCKET, "us-east-1", ME, code_key(SHA), data=(("my-datasets", "x/"),),
                        data_keys=(key,))]
    via_s3 = {"kms:ViaService": "s3.us-east-1.amazonaws.com"}
    assert decide(req("kms:Decrypt", key, **via_s3), node, boundary_policy(("my-datasets",))) == "Allow"
    assert decide(req("kms:Decrypt", key, **via_s3), node, boundary_policy()) == "ImplicitDeny"  # not admitted
    assert decide(req("kms:Decrypt", key), node, boundary_policy(("my-datasets",))) == "ImplicitDeny"  # not via S3
    other = key.replace("1234abcd", "9999abcd")
    assert decide(req("kms:Decrypt", other, **via_s3), node, boundary_policy(("my-datasets",))) == "ImplicitDeny"


# ---------------------------------------------------------------- the normal calls
def test_the_calls_trainctl_makes_are_allowed():
    tag = {"aws:RequestTag/trainctl:job": "job-1"}
    tagged = {"aws:ResourceTag/trainctl:job": "job-1"}
    normal = [
        s3("s3:PutObject", code_key(SHA)), s3("s3:ListBucket", None), s3("s3:PutEncryptionConfiguration", None),
        s3("s3:PutObject", "job-1/status/stopped"), s3("s3:GetObject", "job-1/status/failed"),
        req("s3:CreateBucket", f"arn:aws:s3:::{BUCKET}"),
        req("iam:GetPolicy", f"arn:aws:iam::{ME}:policy/trainctl-boundary"),
        req("iam:TagRole", ROLE, **tag), req("iam:DeleteRolePolicy", ROLE), req("iam:DeleteRole", ROLE),
        req("iam:PassRole", ROLE, **{"iam:PassedToService": "ec2.amazonaws.com"}),
        req("iam:PassRole", f"arn:aws:iam::{ME}:role/trainctl-sagemaker-execution",
            **{"iam:PassedToService": "sagemaker.amazonaws.com"}),
        req("sagemaker:CreateTrainingJob", f"arn:aws:sagemaker:us-east-1:{ME}:training-job/job-1", **tag),
        req("ec2:CreateFleet", f"arn:aws:ec2:us-east-1:{ME}:fleet/f", **tag),
        req("ec2:TerminateInstances", f"arn:aws:ec2:us-east-1:{ME}:instance/i-1", **tagged),
    ]
    for r in normal:
        assert decide(r, CLI) == "Allow", r
    assert decide(req("ec2:TerminateInstances", f"arn:aws:ec2:us-east-1:{ME}:instance/i-1"), CLI) == "ImplicitDeny"


# ---------------------------------------------------------------- the size of a managed policy
def test_split_policies_fit_a_managed_policy_and_keep_every_statement():
    policy = iam.cli_policy("all")
    assert iam.policy_size(policy) > iam.MANAGED_POLICY_LIMIT
    parts = iam.split_policy(policy)
    assert len(parts) >= 2 and all(iam.policy_size(p) <= iam.MANAGED_POLICY_LIMIT for p in parts)
    assert [st for p in parts for st in p["Statement"]] == policy["Statement"]
    assert iam.split_policy(iam.cli_policy("sagemaker")) == [iam.cli_policy("sagemaker")]
    assert iam.policy_size({"a": [1, 2]}) == len('{"a":[1,2]}')  # whitespace is not counted


def test_iam_policy_warns_over_the_limit_and_split_prints_documents_that_fit(tmp_path):
    over = run_cli(["iam-policy", "--platform", "all"], tmp_path)
    assert over.returncode == 0 and json.loads(over.stdout) == iam.cli_policy("all")
    assert "warning" in over.stderr and "6,144" in over.stderr and "--split" in over.stderr
    under = run_cli(["iam-policy", "--platform", "sagemaker"], tmp_path)
    assert under.returncode == 0 and "warning" not in under.stderr
    split = run_cli(["iam-policy", "--platform", "all", "--split"], tmp_path)
    docs = json.loads(split.stdout)
    assert len(docs) >= 2 and all(len(json.dumps(d, separators=(",", ":"))) <= 6144 for d in docs)
    boundary = json.loads(run_cli(["iam-policy", "--role", "boundary"], tmp_path).stdout)
    assert boundary == boundary_policy()


# ---------------------------------------------------------------- the job's own data bucket
def test_a_data_bucket_is_readable_only_when_the_boundary_names_it():
    data = (("company-data", "imagenet/train/"),)
    node = [node_policy("job-1", BUCKET, "us-east-1", ME, code_key(SHA), (), data=data)]
    execution = [execution_policy("job-1", BUCKET, "us-east-1", ME, code_key(SHA), IMAGE, (), True, data)]
    listing = {"s3:prefix": "imagenet/train/"}
    named = boundary_policy(("company-data",))
    for role in (node, execution):
        assert decide(s3("s3:GetObject", "imagenet/train/0001.jpg", bucket="company-data"), role, named) == "Allow"
        assert decide(s3("s3:ListBucket", None, bucket="company-data", **listing), role, named) == "Allow"
        # only its prefix, never a write, and nothing without the boundary naming the bucket
        assert decide(s3("s3:GetObject", "payroll/2026.csv", bucket="company-data"), role, named) == "ImplicitDeny"
        assert decide(s3("s3:ListBucket", None, bucket="company-data", **{"s3:prefix": "payroll/"}), role,
                      named) == "ImplicitDeny"
        assert decide(s3("s3:PutObject", "imagenet/train/x", bucket="company-data"), role, named) == "ImplicitDeny"
        assert decide(s3("s3:GetObject", "imagenet/train/0001.jpg", bucket="company-data"), role,
                      boundary_policy()) == "ImplicitDeny"
    # a role the cli holder writes with `*` stays read-only on the named bucket
    star = [{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}]
    assert decide(s3("s3:PutObject", "k", bucket="company-data"), star, named) == "ImplicitDeny"
    assert decide(s3("s3:GetObject", "k", bucket="another-bucket"), star, named) == "ImplicitDeny"
