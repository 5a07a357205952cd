"""The execution role of one SageMaker job: created by the launch under /trainctl/ with trainctl's
permissions boundary, scoped to the job's own S3 prefix, removed by `trainctl down` once the job has ended.

Why per job: SageMaker's container acts with the execution role's permissions. One role shared by every job
lets any job's code write into another job's checkpoints/ and output/ (docs/security.md). The EC2 backend
already gives each job's nodes their own role; this is the same for SageMaker.

What a training job's role needs (SageMaker Developer Guide, "SageMaker roles", CreateTrainingJob `RoleArn`):
read its input (here the content-addressed code) and write its model artifacts in S3, pull the training
image from ECR, write CloudWatch Logs and metrics, and, in a VPC, create and delete network interfaces.
The role must trust sagemaker.amazonaws.com.

IAM is eventually consistent: a role made seconds ago may not be assumable by SageMaker yet, and
CreateTrainingJob answers `ValidationException: Could not assume role ...`. The launch asks again with a
growing delay for about a minute (the retry on the CreateTrainingJob call, ASSUME_RETRY).
"""
from __future__ import annotations

import json

from trainctl.aws import clients as aws
from trainctl.naming import resources as naming
from trainctl.backends.base import JOB_TAG, AwsCall, tags
from trainctl.naming.tags import SPEC_TAG
from trainctl.backends.calls import Retry
from trainctl.iam.execution_role import SAGEMAKER_TRUST, execution_policy  # noqa: F401 (the job's policy)
POLICY_NAME = "trainctl-sagemaker-job"
EC2_NODE_POLICY = "trainctl-node"  # the EC2 backend's node role policy (backends/ec2/prepare.py)
# SageMaker's answer while a fresh role is not yet visible to it (the same as for a role that does not exist)
ASSUME_RETRY = Retry(code="ValidationException", message="Could not assume role", attempts=7, delay_s=1.0)


def role_name(job_id: str) -> str:
    return naming.job_resource_name(job_id)


def role_calls(job_id: str, region: str, account: str, boundary_arn: str, policy: dict,
               spec_name: str) -> tuple[str, list[AwsCall]]:
    """(the role's ARN, the calls that make it): CreateRole under /trainctl/ with the boundary, then its policy.
    The trainctl:spec tag is what the boundary reads the spec's secrets by (iam/boundary.py)."""
    name = role_name(job_id)
    arn = naming.arn(region, "iam", account, f"role{naming.IAM_PATH}{name}", regional=False)
    return arn, [
        AwsCall("iam", "CreateRole", {"RoleName": name, "Path": naming.IAM_PATH,
                                      "AssumeRolePolicyDocument": json.dumps(SAGEMAKER_TRUST),
                                      "PermissionsBoundary": boundary_arn,
                                      "Description": f"trainctl job {job_id} (SageMaker execution)",
                                      "Tags": tags(job_id, **{SPEC_TAG: spec_name})},
                region, ok_errors=("EntityAlreadyExists",), why="the job's own execution role, within the boundary"),
        AwsCall("iam", "PutRolePolicy", {"RoleName": name, "PolicyName": POLICY_NAME,
                                         "PolicyDocument": json.dumps(policy)},
                region, why="its code, its own checkpoints/ and output/, logs, metrics, image, secrets"),
    ]


def delete_role(iam, job_id: str) -> list[str]:
    """Delete the job's execution role when it carries the job's tag (a role of that name without it is not
    ours and stays); what was removed."""
    name = role_name(job_id)
    try:
        found = iam.list_role_tags(RoleName=name)["Tags"]
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) == "NoSuchEntity":
            return []  # a given --role, or a launch that failed before CreateRole
        if aws.error_code(e) in ("AccessDenied", "AccessDeniedException"):
            # the cli policy may read the tags of every role under /trainctl/, where trainctl makes them all:
            # a denial means no role of that name is there, so none of trainctl's
            return []
        raise
    if not any(t["Key"] == JOB_TAG and t["Value"] == job_id for t in found):
        return []
    try:
        policies = iam.list_role_policies(RoleName=name)["PolicyNames"]
        if EC2_NODE_POLICY in policies:  # the job's EC2 nodes' role (one name serves both): not SageMaker's to delete
            return []
        for policy in policies:
            iam.delete_role_policy(RoleName=name, PolicyName=policy)
        for policy in iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]:
            iam.detach_role_policy(RoleName=name, PolicyArn=policy["PolicyArn"])
        iam.delete_role(RoleName=name)
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) == "NoSuchEntity":
            return []  # another `down` of the job removed it meanwhile: already done
        raise
    return [f"execution role {name}"]
