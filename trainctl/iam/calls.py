"""Least-privilege IAM policies for trainctl, generated from one table.

`CALLS` lists every AWS API operation trainctl makes with the CLI's credentials: the rows every platform shares
here, then each backend's own rows, which it brings as data in `trainctl/backends/<platform>/iam_calls.toml`
(iam/rows.py reads them: a new backend edits nothing here). For each one, the table gives the
IAM actions it needs (an operation may need more than its own name: CreateTrainingJob with Tags needs
sagemaker:AddTags and iam:PassRole), the resources those actions are limited to, and the condition
that scopes them where AWS allows one (the `trainctl:job` tag, the job bucket `trainctl-*`, the execution
role). `cli_policy()` groups the table into statements; nothing is derived from a recording.
tests/sandbox/iam/test_iam_policy.py checks the table against the calls trainctl really makes in the sandbox: each
one must be here, and each row must be made by some command.

Policies for the other two principals are separate documents, each written per job by the backend that
creates the job's role under /trainctl/ with the permissions boundary: the SageMaker execution role (what
the training container does; `iam/execution_role.py`) and the EC2 node role (`iam/node_role.py`).
`iam/documents.py` prints their shapes, with placeholders, for review.
"""
from __future__ import annotations

import json

from trainctl.iam.boundary import cli_denies
from trainctl.iam.constants import (BOUNDARY_POLICY, BUCKET, EXECUTION_ROLE, PLATFORMS, SAME_ACCOUNT, TAGGED_REQUEST,
                                   TAGGED_RESOURCE, WITH_BOUNDARY)
from trainctl.iam.rows import Call, Grant, backend_calls


def _create_action(*operations: str) -> dict:
    return {"StringEquals": {"ec2:CreateAction": list(operations)}}


def _g(*actions: str, resources: tuple[str, ...] = ("*",), condition: dict | None = None, why: str = "") -> Grant:
    return Grant(tuple(actions), resources, condition, why)


EC2 = "arn:aws:ec2:*:*"
S3_BUCKET = f"arn:aws:s3:::{BUCKET}"
S3_OBJECTS = f"arn:aws:s3:::{BUCKET}/*"
# naming/bucket.job_bucket: trainctl-ACCOUNT-REGION; aws:PrincipalAccount is a global key, so a policy variable in a
# Resource (IAM User Guide, "IAM policy elements: Variables and tags")
OWN_BUCKETS = "arn:aws:s3:::trainctl-${aws:PrincipalAccount}-*"
SPOT_ROLE = "arn:aws:iam::*:role/aws-service-role/spot.amazonaws.com/AWSServiceRoleForEC2Spot"
ON_BUCKET = {"resources": (S3_BUCKET,), "condition": SAME_ACCOUNT}
ON_OBJECTS = {"resources": (S3_OBJECTS,), "condition": SAME_ACCOUNT}
BOTH = PLATFORMS
# The user's own data buckets (`trainctl iam-policy --data-bucket NAME`): the launch checks each data: channel
# before billing (backends/data_checks.py). Without --data-bucket these grants are left out.
DATA_BUCKET = "{data_bucket}"
DESCRIBE = "Describe/List/Get calls on EC2 cannot be limited to resources; they return metadata only"

CALLS: tuple[Call, ...] = (
    # ---- planning (plan, launch's re-plan) and the job bucket: every platform
    Call("ec2:DescribeAvailabilityZones", BOTH, (_g("ec2:DescribeAvailabilityZones", why=DESCRIBE),)),
    Call("ec2:GetSpotPlacementScores", BOTH, (_g("ec2:GetSpotPlacementScores", why=DESCRIBE),)),
    Call("ec2:DescribeSpotPriceHistory", BOTH, (_g("ec2:DescribeSpotPriceHistory", why=DESCRIBE),)),
    # the plan's Capacity Block offers for the layouts AWS sells as blocks (planner/capacity_blocks.py)
    Call("ec2:DescribeCapacityBlockOfferings", BOTH, (_g("ec2:DescribeCapacityBlockOfferings", why=DESCRIBE),)),
    Call("pricing:GetProducts", BOTH, (_g("pricing:GetProducts", why="the Price List API has no resources"),)),
    Call("service-quotas:ListServiceQuotas", BOTH, (_g("servicequotas:ListServiceQuotas",
                                                       why="Service Quotas reads have no resources"),)),
    # a quota with no applied value is left out of ListServiceQuotas: its AWS default is read instead
    Call("service-quotas:GetAWSDefaultServiceQuota", BOTH, (_g("servicequotas:GetAWSDefaultServiceQuota",
                                                               why="Service Quotas reads have no resources"),)),
    # `trainctl cost` (billed dollars) and `doctor` (is the trainctl:job cost allocation tag active?)
    Call("ce:GetCostAndUsage", BOTH, (_g("ce:GetCostAndUsage", why="Cost Explorer reads have no resources"),)),
    Call("ce:ListCostAllocationTags", BOTH, (_g("ce:ListCostAllocationTags",
                                                 why="Cost Explorer reads have no resources"),)),
    # `launch --notify arn:...:sns:...`: `watch` publishes the job's news to the user's topic (any topic: the
    # user names it per launch; SNS checks the topic's own policy too)
    Call("sns:Publish", BOTH, (_g("sns:Publish", resources=("arn:aws:sns:*:*:*",),
                                  why="the topic given to launch --notify: named per launch, so any topic"),)),
    Call("sts:GetCallerIdentity", BOTH, ()),  # needs no permission: every principal may ask who it is
    Call("s3:HeadBucket", BOTH, (_g("s3:ListBucket", **ON_BUCKET),)),
    # data: channels, checked before billing: the bucket's region, one key under the prefix, the FSx file system
    Call("s3:GetBucketLocation", BOTH, (_g("s3:GetBucketLocation", resources=(DATA_BUCKET,)),)),
    Call("s3:ListObjectsV2", BOTH, (_g("s3:ListBucket", resources=(DATA_BUCKET,)),)),
    Call("fsx:DescribeFileSystems", BOTH, (_g("fsx:DescribeFileSystems", why="FSx lists take no resource-level "
                                                                          "scope narrower than the file system"),)),
    Call("s3:CreateBucket", BOTH, (_g("s3:CreateBucket", resources=(S3_BUCKET,)),)),
    Call("s3:PutBucketTagging", BOTH, (_g("s3:PutBucketTagging", **ON_BUCKET),)),
    Call("s3:PutBucketEncryption", BOTH, (_g("s3:PutEncryptionConfiguration", **ON_BUCKET),)),
    Call("s3:PutPublicAccessBlock", BOTH, (_g("s3:PutBucketPublicAccessBlock", **ON_BUCKET),)),
    Call("s3:GetBucketLifecycleConfiguration", BOTH, (_g("s3:GetLifecycleConfiguration", **ON_BUCKET),)),
    # A lifecycle rule can expire every object of its bucket, and S3 has no condition key on a rule's content
    # (Service Authorization Reference, Amazon S3: PutLifecycleConfiguration): so only the job buckets trainctl
    # names for the caller's own account, never any other bucket whose name starts with trainctl-.
    Call("s3:PutBucketLifecycleConfiguration", BOTH, (_g("s3:PutLifecycleConfiguration", resources=(OWN_BUCKETS,),
                                                         condition=SAME_ACCOUNT),)),
    Call("s3:HeadObject", BOTH, (_g("s3:GetObject", **ON_OBJECTS),)),
    Call("s3:PutObject", BOTH, (_g("s3:PutObject", "s3:PutObjectTagging", **ON_OBJECTS),)),
    Call("ec2:DescribeVpcs", BOTH, (_g("ec2:DescribeVpcs", why=DESCRIBE),)),
    Call("ec2:DescribeSubnets", BOTH, (_g("ec2:DescribeSubnets", why=DESCRIBE),)),
    Call("ec2:DescribeSecurityGroups", BOTH, (_g("ec2:DescribeSecurityGroups", why=DESCRIBE),)),
    Call("ec2:CreateSecurityGroup", BOTH, (
        _g("ec2:CreateSecurityGroup", resources=(f"{EC2}:vpc/*",)),
        _g("ec2:CreateSecurityGroup", resources=(f"{EC2}:security-group/*",), condition=TAGGED_REQUEST),
        _g("ec2:CreateTags", resources=(f"{EC2}:security-group/*",),
           condition=_create_action("CreateSecurityGroup")))),
    Call("ec2:AuthorizeSecurityGroupIngress", BOTH, (
        _g("ec2:AuthorizeSecurityGroupIngress", resources=(f"{EC2}:security-group/*",), condition=TAGGED_RESOURCE),
        _g("ec2:CreateTags", resources=(f"{EC2}:security-group-rule/*",),
           condition=_create_action("AuthorizeSecurityGroupIngress")))),
    # EFA needs all traffic out to the group itself too (EC2 User Guide, EFA security group step).
    Call("ec2:AuthorizeSecurityGroupEgress", BOTH, (
        _g("ec2:AuthorizeSecurityGroupEgress", resources=(f"{EC2}:security-group/*",), condition=TAGGED_RESOURCE),
        _g("ec2:CreateTags", resources=(f"{EC2}:security-group-rule/*",),
           condition=_create_action("AuthorizeSecurityGroupEgress")))),
    Call("ec2:DeleteSecurityGroup", BOTH, (_g("ec2:DeleteSecurityGroup", resources=(f"{EC2}:security-group/*",),
                                              condition=TAGGED_RESOURCE),)),
    # ---- launch and doctor (reads only): the subnet's routes and endpoints
    Call("ec2:DescribeRouteTables", BOTH, (_g("ec2:DescribeRouteTables", why=DESCRIBE),)),
    Call("ec2:DescribeVpcEndpoints", BOTH, (_g("ec2:DescribeVpcEndpoints", why=DESCRIBE),)),
    # the job bucket's (doctor), and a data bucket's: SSE-KMS with the user's key needs kms:Decrypt in the job role
    Call("s3:GetBucketEncryption", BOTH, (_g("s3:GetEncryptionConfiguration", **ON_BUCKET),
                                          _g("s3:GetEncryptionConfiguration", resources=(DATA_BUCKET,)))),
    Call("s3:GetPublicAccessBlock", BOTH, (_g("s3:GetBucketPublicAccessBlock", **ON_BUCKET),)),
    Call("s3:GetBucketPolicyStatus", BOTH, (_g("s3:GetBucketPolicyStatus", **ON_BUCKET),)),
    # ---- the job's role and its state, on every platform
    # SageMaker's execution role (launch --role) and EC2's Spot service-linked role, checked by `doctor` and the launch
    Call("iam:GetRole", BOTH, (_g("iam:GetRole", resources=("arn:aws:iam::*:role/{execution_role}", SPOT_ROLE)),)),
    # EC2's `down` too: a job that runs on SageMaker is refused there (backends/ec2/cleanup.py)
    Call("sagemaker:DescribeTrainingJob", BOTH, (_g("sagemaker:DescribeTrainingJob",
                                                    resources=("arn:aws:sagemaker:*:*:training-job/*",)),)),
    # `ls --all`: the account's resources tagged trainctl:job (every platform)
    Call("resourcegroupstaggingapi:GetResources", BOTH, (_g("tag:GetResources",
                                                            why="the Tagging API's reads have no resources"),)),
    Call("logs:DescribeLogStreams", BOTH, (_g("logs:DescribeLogStreams", resources=(
        "arn:aws:logs:*:*:log-group:/aws/sagemaker/TrainingJobs:*", "arn:aws:logs:*:*:log-group:/trainctl/*")),)),
    Call("logs:FilterLogEvents", BOTH, (_g("logs:FilterLogEvents", resources=(
        "arn:aws:logs:*:*:log-group:/aws/sagemaker/TrainingJobs:*", "arn:aws:logs:*:*:log-group:/trainctl/*")),)),
    # SageMaker's `down` too: a job whose EC2 nodes live is refused there (backends/sagemaker/cleanup.py)
    Call("ec2:DescribeInstances", BOTH, (_g("ec2:DescribeInstances", why=DESCRIBE),)),
    # an FSx channel (EC2 and SageMaker): the file system's network interfaces name its groups (lustre_network.py)
    Call("ec2:DescribeNetworkInterfaces", BOTH, (_g("ec2:DescribeNetworkInterfaces", why=DESCRIBE),)),
    # the blocks and On-Demand Capacity Reservations the account holds (the plan offers them; `launch --buy-capacity-block`
    # never buys one twice)
    Call("ec2:DescribeCapacityReservations", BOTH, (_g("ec2:DescribeCapacityReservations", why=DESCRIBE),)),
    # `ls --all` and a job this machine did not launch: the regions of the account's trainctl buckets
    # (ListAllMyBuckets takes no resource: "*", limited to the caller's own account by s3:ResourceAccount)
    Call("s3:ListBuckets", BOTH, (_g("s3:ListAllMyBuckets", condition=SAME_ACCOUNT,
                                     why="trainctl asks for its own buckets (Prefix trainctl-ACCOUNT-) only"),)),
    Call("s3:GetObject", BOTH, (_g("s3:GetObject", **ON_OBJECTS),)),  # EC2's markers; `fetch` on every platform
    Call("s3:ListObjectsV2", BOTH, (_g("s3:ListBucket", **ON_BUCKET),)),
    # `launch --resume-from JOB`: the earlier job's checkpoints copied into the new job's folder by boto3's managed
    # copy (usecases/launch/resume.py): CopyObject below its threshold (s3:GetObject on the source, s3:PutObject on
    # the target), above it a multipart upload (S3 User Guide, "Multipart upload API and permissions": initiate,
    # upload part (copy) and complete need s3:PutObject, a part copy s3:GetObject on the source too; the abort of a
    # copy cut short needs s3:AbortMultipartUpload, so that its parts are not left billed)
    Call("s3:CopyObject", BOTH, (_g("s3:GetObject", "s3:PutObject", **ON_OBJECTS),)),
    Call("s3:CreateMultipartUpload", BOTH, (_g("s3:PutObject", "s3:AbortMultipartUpload", **ON_OBJECTS),)),
    Call("s3:UploadPartCopy", BOTH, (_g("s3:GetObject", "s3:PutObject", **ON_OBJECTS),)),
    Call("s3:CompleteMultipartUpload", BOTH, (_g("s3:PutObject", **ON_OBJECTS),)),
    # Creating a role or writing its policy requires trainctl's permissions boundary on it: without it,
    # iam:CreateRole + iam:PutRolePolicy would let the holder of this policy make itself an admin.
    # Both platforms make one role per job: EC2 for its nodes, SageMaker as the job's execution role.
    Call("iam:GetPolicy", BOTH, (_g("iam:GetPolicy", resources=(f"arn:aws:iam::*:policy/{BOUNDARY_POLICY}",)),)),
    # reading the boundary's document: does it admit the job's data bucket (backends/launch_limits.py)
    Call("iam:GetPolicyVersion", BOTH, (_g("iam:GetPolicyVersion",
                                           resources=(f"arn:aws:iam::*:policy/{BOUNDARY_POLICY}",)),)),
    Call("iam:CreateRole", BOTH, (
        _g("iam:CreateRole", resources=("arn:aws:iam::*:role/trainctl/*",), condition=WITH_BOUNDARY),
        _g("iam:TagRole", resources=("arn:aws:iam::*:role/trainctl/*",), condition=TAGGED_REQUEST))),
    Call("iam:PutRolePolicy", BOTH, (_g("iam:PutRolePolicy", resources=("arn:aws:iam::*:role/trainctl/*",),
                                        condition=WITH_BOUNDARY),)),
    *(Call(f"iam:{op}", BOTH, (_g(f"iam:{op}", resources=("arn:aws:iam::*:role/trainctl/*",)),))
      for op in ("DeleteRolePolicy", "ListRoleTags", "ListRolePolicies", "ListAttachedRolePolicies",
                 "DetachRolePolicy", "DeleteRole")),
    # ---- what one platform alone calls: each backend's rows, trainctl/backends/<platform>/iam_calls.toml (iam/rows.py)
    *backend_calls(),
)


def calls_for(platform: str = "all") -> tuple[Call, ...]:
    wanted = PLATFORMS if platform == "all" else (platform,)
    return tuple(c for c in CALLS if set(c.platforms) & set(wanted))


def _fill(value, execution_role: str, data_buckets: tuple[str, ...] = ()):
    if value == DATA_BUCKET:
        return [f"arn:aws:s3:::{bucket}" for bucket in data_buckets]
    if isinstance(value, str):
        return [value.replace("{execution_role}", execution_role)]
    if isinstance(value, (list, tuple)):
        return [out for v in value for out in _fill(v, execution_role, data_buckets)]
    return value


def cli_policy(platform: str = "all", execution_role: str = EXECUTION_ROLE, data_buckets: tuple[str, ...] = ()) -> dict:
    """The policy for the person or CI role that runs trainctl: statements grouped by (resources, condition).
    `data_buckets`: the buckets of the jobs' data: channels, which the launch checks before billing."""
    grants = [grant for call in calls_for(platform) for grant in call.grants]
    statements = allow_statements(grants, execution_role, data_buckets)
    statements += cli_denies()  # both platforms create roles: keep their boundary in place
    return {"Version": "2012-10-17", "Statement": statements}


def allow_statements(grants: list[Grant], execution_role: str = EXECUTION_ROLE,
                     data_buckets: tuple[str, ...] = ()) -> list[dict]:
    """Allow statements for `grants`, one per (resources, condition), in a stable order."""
    groups: dict[str, dict] = {}
    for grant in grants:
        resources = sorted(set(_fill(grant.resources, execution_role, data_buckets)))
        if not resources:
            continue
        key = json.dumps([resources, grant.condition], sort_keys=True)
        st = groups.setdefault(key, {"actions": set(), "resources": resources, "condition": grant.condition})
        st["actions"].update(grant.actions)
    statements = []
    for i, (_, g) in enumerate(sorted(groups.items(), key=lambda kv: (kv[1]["resources"] != ["*"], kv[0])), 1):
        st = {"Sid": f"Trainctl{i}", "Effect": "Allow", "Action": sorted(g["actions"]),
              "Resource": g["resources"][0] if len(g["resources"]) == 1 else g["resources"]}
        if g["condition"]:
            st["Condition"] = g["condition"]
        statements.append(st)
    return statements


def granted_actions(policy: dict) -> set[str]:
    out: set[str] = set()
    for st in policy["Statement"]:
        if st["Effect"] != "Allow":
            continue
        actions = st["Action"]
        out.update([actions] if isinstance(actions, str) else actions)
    return out
