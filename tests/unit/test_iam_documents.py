"""trainctl's IAM documents through an IAM linter built on AWS's Service Authorization Reference (parliament,
tests/support/iam_lint.py): every resource type an allowed action requires is allowed by some statement, and
the linter finds nothing else wrong (condition operators of the right type, known actions, valid ARNs)."""
from __future__ import annotations

import pytest

from tests.support.iam_lint import findings, uncovered
from trainctl import iam
from trainctl.iam.boundary import boundary_policy
from trainctl.iam.execution_role import execution_policy
from trainctl.iam.node_role import node_policy
from trainctl.iam.viewer import viewer_policy
from trainctl.naming.bucket import agent_key, code_key

ACCOUNT, REGION, BUCKET = "123456789012", "us-east-1", "trainctl-123456789012-us-east-1"
SECRETS = (f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/trainctl/hf-token",
           f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:trainctl/db-AbCdEf")
IMAGE = f"763104351884.dkr.ecr.{REGION}.amazonaws.com/pytorch-training:2.5.1-gpu-py311-cu124-ubuntu22.04-sagemaker"
# Statements whose actions take no resource but "*" (EC2 Describe, ecr:GetAuthorizationToken, ...), or that AWS
# lets scope only to "*" (kms:Decrypt through SSM/Secrets Manager, SageMaker's VPC interfaces): reviewed, kept.
ACCEPTED = ("RESOURCE_STAR", "RESOURCE_MISMATCH")  # RESOURCE_MISMATCH: per statement; `uncovered` checks across

DOCUMENTS = {
    **{f"cli-{p}": iam.cli_policy(p) for p in ("sagemaker", "ec2", "all")},
    "ec2-node": node_policy("job-1", BUCKET, REGION, ACCOUNT, code_key("a" * 64), SECRETS,
                            agent_key=agent_key("b" * 64)),
    "sagemaker-execution": execution_policy("job-1", BUCKET, REGION, ACCOUNT, code_key("a" * 64), IMAGE, SECRETS,
                                            in_vpc=True),
    "boundary": boundary_policy(),
    # with the job's own data: channels (its bucket and prefix) and the boundary naming the data bucket
    "cli-all-data": iam.cli_policy("all", data_buckets=("my-datasets",)),
    "ec2-node-data": node_policy("job-1", BUCKET, REGION, ACCOUNT, code_key("a" * 64), SECRETS,
                                 data=(("my-datasets", "imagenet/train/"), ("other-data", ""))),
    "sagemaker-execution-data": execution_policy("job-1", BUCKET, REGION, ACCOUNT, code_key("a" * 64), IMAGE, SECRETS,
                                                 in_vpc=True, data=(("my-datasets", "imagenet/train/"),)),
    "boundary-data": boundary_policy(("my-datasets",)),
    "viewer": viewer_policy(),
}


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_every_required_resource_type_of_an_allowed_action_is_allowed(name):
    assert uncovered(DOCUMENTS[name]) == []


# Reviewed and kept: the cli policy's s3:PutLifecycleConfiguration (the abort rule for incomplete uploads) could
# expire objects in trainctl-* buckets without s3:DeleteObject; its holder may already overwrite every object
# there (s3:PutObject), so it gains no new power over the jobs' data.
ACCEPTED_ESCALATION = "due to s3:DeleteObject not being allowed, but does allow s3:PutLifecycleConfiguration"


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_the_linter_finds_nothing_else(name):
    assert [f for f in findings(DOCUMENTS[name], ignore=ACCEPTED) if ACCEPTED_ESCALATION not in f] == []


def test_a_required_type_that_no_statement_allows_is_found():
    """CreateFleet allowed on the fleet alone: AWS also authorizes it against the instances it launches."""
    fleet_only = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "ec2:CreateFleet", "Resource": "arn:aws:ec2:*:*:fleet/*"},
        {"Effect": "Allow", "Action": "ec2:RunInstances", "Resource": "arn:aws:ec2:*:*:instance/*"}]}
    found = uncovered(fleet_only)
    assert any(f.startswith("ec2:CreateFleet needs instance") for f in found), found
    # RunInstances requires image, network-interface, security-group and subnet too
    assert {f.split()[2] for f in found if f.startswith("ec2:RunInstances")} == {
        "image", "network-interface", "security-group", "subnet"}
    # the same types in two statements are covered: the check is across statements, as AWS evaluates
    split = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "ec2:CreateFleet", "Resource": "arn:aws:ec2:*:*:fleet/*"},
        {"Effect": "Allow", "Action": "ec2:CreateFleet", "Resource": "arn:aws:ec2:*:*:instance/*"}]}
    assert uncovered(split) == []


def test_an_arn_key_compared_as_a_string_is_found():
    string_op = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "iam:CreateRole", "Resource": "arn:aws:iam::*:role/trainctl/*",
         "Condition": {"StringEquals": {"iam:PermissionsBoundary": iam.BOUNDARY_ARN}}}]}
    assert any(f.startswith("MISMATCHED_TYPE") for f in findings(string_op, ignore=ACCEPTED))
