"""The documents `trainctl iam-policy` prints: each role's policy (the per-job ones with placeholders, for
review), trust policies, ARNs in another partition, and the size and split for managed policies."""
from __future__ import annotations

import json

from trainctl.iam.boundary import boundary_policy
from trainctl.iam.calls import cli_policy
from trainctl.iam.constants import BOUNDARY_POLICY, EXECUTION_ROLE, MANAGED_POLICY_LIMIT, PLATFORMS, ROLES
from trainctl.iam.execution_role import SAGEMAKER_TRUST, execution_policy
from trainctl.iam.node_role import EC2_TRUST, node_policy
from trainctl.naming.bucket import agent_key, code_key


def sagemaker_execution_policy() -> dict:
    """The per-job execution role's shape: the SageMaker launch writes this per job with the job id, bucket,
    code key, image, region and account filled in (backends/sagemaker/role.py); here with placeholders, for review."""
    return execution_policy("JOB_ID", "trainctl-ACCOUNT-REGION", "REGION", "ACCOUNT", code_key("SHA256"),
                            "DLC_ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPOSITORY:TAG",
                            ("arn:aws:ssm:REGION:ACCOUNT:parameter/trainctl/SPEC/NAME",), in_vpc=True)


def ec2_node_policy() -> dict:
    """The node role's shape: the EC2 backend writes this per job with the job id, bucket, region and account
    filled in (backends/ec2/prepare.py); here with wildcards, for review."""
    return node_policy("JOB_ID", "trainctl-ACCOUNT-REGION", "REGION", "ACCOUNT", code_key("SHA256"),
                       ("arn:aws:ssm:REGION:ACCOUNT:parameter/trainctl/SPEC/NAME",), agent_key=agent_key("SHA256"))


def in_partition(document, partition: str):
    """The documents with every ARN in `partition` (aws, aws-cn, aws-us-gov): ARNs are written for `aws` here."""
    if isinstance(document, str):
        return document.replace("arn:aws:", f"arn:{partition}:") if partition != "aws" else document
    if isinstance(document, dict):
        return {k: in_partition(v, partition) for k, v in document.items()}
    if isinstance(document, list):
        return [in_partition(v, partition) for v in document]
    return document


def documents(platform: str = "all", role: str = "cli", execution_role: str = EXECUTION_ROLE,
              data_buckets: tuple[str, ...] = ()) -> dict:
    """{"role", "platform", "policy", plus "trust_policy" for the roles AWS services assume}."""
    if platform not in (*PLATFORMS, "all"):
        from trainctl.errors import UsageError

        raise UsageError(f"--platform {platform!r}: use {', '.join(PLATFORMS)} or all")
    if role == "cli":
        return {"role": role, "platform": platform, "policy": cli_policy(platform, execution_role, data_buckets)}
    if role == "viewer":
        from trainctl.iam.viewer import viewer_policy

        return {"role": role, "note": "read-only: `ls --all`, `watch`, `logs` and `calibration` on any job of the "
                                      "account; no launch, stop or down (docs/security.md)", "policy": viewer_policy()}
    if role == "sagemaker-execution":
        return {"role": role, "note": "created per job by `trainctl launch` (SageMaker) under /trainctl/ with the "
                                      "permissions boundary, removed by `trainctl down`; with --role NAME, that role "
                                      "is used instead and keeping jobs apart is its policy's job",
                "policy": sagemaker_execution_policy(), "trust_policy": SAGEMAKER_TRUST}
    if role == "ec2-node":
        return {"role": role, "note": "created per job by `trainctl launch --platform ec2` under /trainctl/, "
                                      "removed by `trainctl down`", "policy": ec2_node_policy(),
                "trust_policy": EC2_TRUST}
    if role == "boundary":
        return {"role": role, "policy_name": BOUNDARY_POLICY, "note": "create once per account as a managed "
                "policy named trainctl-boundary; every role trainctl creates must carry it", "policy": boundary_policy(data_buckets)}
    from trainctl.errors import UsageError

    raise UsageError(f"--role {role!r}: use {', '.join(ROLES)}")


def policy_size(policy: dict) -> int:
    """The size IAM counts against its quotas: the JSON without whitespace."""
    return len(json.dumps(policy, separators=(",", ":")))


def split_policy(policy: dict, limit: int = MANAGED_POLICY_LIMIT) -> list[dict]:
    """The statements packed in order into as few documents as fit under `limit` each (attach them all:
    the permissions of several policies add up, and a Deny in any of them holds)."""
    empty = policy_size({"Version": policy["Version"], "Statement": []})
    docs: list[list[dict]] = [[]]
    for st in policy["Statement"]:
        size = policy_size(st)
        if empty + size > limit:
            raise ValueError(f"statement {st.get('Sid', '?')} alone is {size} characters, over {limit}")
        if docs[-1] and policy_size({"Version": policy["Version"], "Statement": [*docs[-1], st]}) > limit:
            docs.append([])
        docs[-1].append(st)
    return [{"Version": policy["Version"], "Statement": sts} for sts in docs]
