"""Least-privilege IAM policies for trainctl, generated from one table.

`CALLS` lists every AWS API operation trainctl makes with the CLI's credentials, and for each one the
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
from dataclasses import dataclass, field

from trainctl.iam.boundary import cli_denies
from trainctl.iam.constants import (BOUNDARY_POLICY, BUCKET, EC2_PASS, EXECUTION_ROLE, PLATFORMS, SAGEMAKER_PASS,
                                   SAME_ACCOUNT, TAGGED_REQUEST, TAGGED_RESOURCE, WITH_BOUNDARY)


def _create_action(*operations: str) -> dict:
    return {"StringEquals": {"ec2:CreateAction": list(operations)}}


@dataclass(frozen=True)
class Grant:
    actions: tuple[str, ...]
    resources: tuple[str, ...] = ("*",)
    condition: dict | None = None
    why: str = ""


@dataclass(frozen=True)
class Call:
    """One API operation trainctl calls ('service:Operation', botocore's names) and what it needs."""

    operation: str
    platforms: tuple[str, ...]    # which --platform needs it ("sagemaker", "ec2"); planning needs both
    grants: tuple[Grant, ...] = field(default=())


def _g(*actions: str, resources: tuple[str, ...] = ("*",), condition: dict | None = None, why: str = "") -> Grant:
    return Grant(tuple(actions), resources, condition, why)


EC2 = "arn:aws:ec2:*:*"
TRAINING_PLAN_RESOURCES = ("arn:aws:sagemaker:*:*:training-plan/*", "arn:aws:sagemaker:*:*:reserved-capacity/*")
TAGGED_SAGEMAKER = ("arn:aws:sagemaker:*:*:training-job/*", *TRAINING_PLAN_RESOURCES)  # made with the job tag
S3_BUCKET = f"arn:aws:s3:::{BUCKET}"
S3_OBJECTS = f"arn:aws:s3:::{BUCKET}/*"
# naming/bucket.job_bucket: trainctl-ACCOUNT-REGION; aws:PrincipalAccount is a global key, so a policy variable in a
# Resource (IAM User Guide, "IAM policy elements: Variables and tags")
OWN_BUCKETS = "arn:aws:s3:::trainctl-${aws:PrincipalAccount}-*"
SPOT_ROLE = "arn:aws:iam::*:role/aws-service-role/spot.amazonaws.com/AWSServiceRoleForEC2Spot"
ON_BUCKET = {"resources": (S3_BUCKET,), "condition": SAME_ACCOUNT}
ON_OBJECTS = {"resources": (S3_OBJECTS,), "condition": SAME_ACCOUNT}
BOTH = PLATFORMS
SM = ("sagemaker",)
E2 = ("ec2",)
LAUNCH = ("ec2:CreateFleet", "ec2:RunInstances")
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
    # the plan's SageMaker training plan offers for the layouts AWS reserves (aws/training_plans.py)
    Call("sagemaker:SearchTrainingPlanOfferings", SM, (_g("sagemaker:SearchTrainingPlanOfferings",
                                                            why="a search of offers has no resource"),)),
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
    # ---- SageMaker
    Call("iam:GetRole", BOTH, (_g("iam:GetRole", resources=("arn:aws:iam::*:role/{execution_role}", SPOT_ROLE)),)),
    Call("sagemaker:CreateTrainingJob", SM, (
        # with the job tag; on a training plan (ResourceConfig.TrainingPlanArn) its optional training-plan and
        # reserved-capacity resources too (Service Authorization Reference, SageMaker): any plan of the account's
        _g("sagemaker:CreateTrainingJob", "sagemaker:AddTags", resources=TAGGED_SAGEMAKER, condition=TAGGED_REQUEST),
        _g("iam:PassRole", resources=("arn:aws:iam::*:role/trainctl/*", "arn:aws:iam::*:role/{execution_role}"),
           condition=SAGEMAKER_PASS, why="only the per-job execution roles and a given role, only to SageMaker"))),
    # `launch --buy-capacity-block` on a SageMaker option: the plans the account holds (ListTrainingPlans; their tags
    # with ListTags, to find the spec's), the purchase with the job's tags (CreateTrainingPlan: training-plan takes
    # aws:RequestTag; its dependent actions AddTags (with the job tag, as a job's) and CreateReservedCapacity, as AWS's
    # managed policy AmazonSageMakerTrainingPlanCreateAccess grants them) and the plan it became (DescribeTrainingPlan)
    Call("sagemaker:ListTrainingPlans", SM, (_g("sagemaker:ListTrainingPlans", why="a list call has no resource"),)),
    # (the resources grouped as few as they can be, TAGGED_SAGEMAKER and TRAINING_PLAN_RESOURCES: the CLI's
    # SageMaker policy stays within one managed policy's 6,144 characters)
    Call("sagemaker:CreateTrainingPlan", SM, (
        _g("sagemaker:CreateTrainingPlan", "sagemaker:AddTags", resources=TAGGED_SAGEMAKER,
           condition=TAGGED_REQUEST, why="only a plan bought with the job tag"),
        _g("sagemaker:CreateReservedCapacity", resources=TRAINING_PLAN_RESOURCES))),
    Call("sagemaker:DescribeTrainingPlan", SM, (_g("sagemaker:DescribeTrainingPlan",
                                                   resources=TRAINING_PLAN_RESOURCES),)),
    # EC2's `down` too: a job that runs on SageMaker is refused there (backends/ec2/cleanup.py)
    Call("sagemaker:DescribeTrainingJob", BOTH, (_g("sagemaker:DescribeTrainingJob",
                                                    resources=("arn:aws:sagemaker:*:*:training-job/*",)),)),
    Call("sagemaker:ListTrainingJobs", SM, (_g("sagemaker:ListTrainingJobs", why="`ls --all`: a list call has no "
                                                                            "resource to scope it to"),)),
    # `ls --all`: the account's resources tagged trainctl:job (both platforms)
    Call("resourcegroupstaggingapi:GetResources", BOTH, (_g("tag:GetResources",
                                                            why="the Tagging API's reads have no resources"),)),
    Call("sagemaker:ListTags", SM, (_g("sagemaker:ListTags", resources=("arn:aws:sagemaker:*:*:training-job/*",)),
                                    _g("sagemaker:ListTags", resources=TRAINING_PLAN_RESOURCES))),
    Call("sagemaker:StopTrainingJob", SM, (_g("sagemaker:StopTrainingJob",
                                              resources=("arn:aws:sagemaker:*:*:training-job/*",),
                                              condition=TAGGED_RESOURCE),)),
    Call("logs:DescribeLogStreams", BOTH, (_g("logs:DescribeLogStreams", resources=(
        "arn:aws:logs:*:*:log-group:/aws/sagemaker/TrainingJobs:*", "arn:aws:logs:*:*:log-group:/trainctl/*")),)),
    Call("logs:FilterLogEvents", BOTH, (_g("logs:FilterLogEvents", resources=(
        "arn:aws:logs:*:*:log-group:/aws/sagemaker/TrainingJobs:*", "arn:aws:logs:*:*:log-group:/trainctl/*")),)),
    # ---- EC2: fleets of tagged instances, a per-job role for the nodes under /trainctl/
    Call("ssm:GetParameter", E2, (_g("ssm:GetParameter", resources=(
        "arn:aws:ssm:*::parameter/aws/service/deeplearning/*", "arn:aws:ssm:*::parameter/aws/service/neuron/*"),
        why="the Deep Learning AMI ids AWS publishes"),)),
    Call("ec2:DescribeInstanceTypeOfferings", E2, (_g("ec2:DescribeInstanceTypeOfferings", why=DESCRIBE),)),
    Call("ec2:DescribeImages", E2, (_g("ec2:DescribeImages", why=DESCRIBE),)),  # the AMI's root device name
    # SageMaker's `down` too: a job whose EC2 nodes live is refused there (backends/sagemaker/cleanup.py)
    Call("ec2:DescribeInstances", BOTH, (_g("ec2:DescribeInstances", why=DESCRIBE),)),
    Call("ec2:DescribeLaunchTemplates", E2, (_g("ec2:DescribeLaunchTemplates", why=DESCRIBE),)),
    Call("ec2:DescribeLaunchTemplateVersions", E2, (_g("ec2:DescribeLaunchTemplateVersions", why=DESCRIBE),)),
    Call("ec2:DescribeFleets", E2, (_g("ec2:DescribeFleets", why=DESCRIBE),)),
    Call("ec2:DescribePlacementGroups", E2, (_g("ec2:DescribePlacementGroups", why=DESCRIBE),)),
    # an FSx channel (EC2 and SageMaker): the file system's network interfaces name its groups (lustre_network.py)
    Call("ec2:DescribeNetworkInterfaces", BOTH, (_g("ec2:DescribeNetworkInterfaces", why=DESCRIBE),)),
    Call("ec2:CreatePlacementGroup", E2, (
        _g("ec2:CreatePlacementGroup", resources=(f"{EC2}:placement-group/*",), condition=TAGGED_REQUEST),
        _g("ec2:CreateTags", resources=(f"{EC2}:placement-group/*",),
           condition=_create_action("CreatePlacementGroup")))),
    Call("ec2:CreateLaunchTemplate", E2, (
        _g("ec2:CreateLaunchTemplate", resources=(f"{EC2}:launch-template/*",), condition=TAGGED_REQUEST),
        _g("ec2:CreateTags", resources=(f"{EC2}:launch-template/*",),
           condition=_create_action("CreateLaunchTemplate")))),
    # CreateFleet and the RunInstances of its instant fleet are authorized against every resource the launch
    # touches (Service Authorization Reference, EC2: CreateFleet requires fleet and instance, RunInstances
    # requires image, instance, network-interface, security-group and subnet; both also check the launch
    # template, volumes, snapshots, placement group and Spot request they use). Granted together on all of
    # them, as Karpenter's controller policy does.
    Call("ec2:CreateFleet", E2, (
        _g(*LAUNCH, resources=tuple(f"{EC2}:{r}/*" for r in ("fleet", "instance", "volume", "network-interface")),
           condition=TAGGED_REQUEST, why="what the launch creates carries the job tag"),
        _g(*LAUNCH, resources=(f"{EC2}:launch-template/*", f"{EC2}:placement-group/*"), condition=TAGGED_RESOURCE,
           why="the job's own template and placement group"),
        _g(*LAUNCH, resources=(f"{EC2}:subnet/*", f"{EC2}:security-group/*", f"{EC2}:key-pair/*",
                               f"{EC2}:spot-instances-request/*", "arn:aws:ec2:*::image/*", "arn:aws:ec2:*::snapshot/*"),
           why="used, not changed: the subnets, a --security-group of the user's (untagged), the AMI and its "
               "snapshots; a Spot request comes only with a tagged instance"),
        _g("ec2:CreateTags", resources=(f"{EC2}:fleet/*", f"{EC2}:instance/*", f"{EC2}:volume/*",
                                        f"{EC2}:network-interface/*"),
           condition=_create_action("CreateFleet", "RunInstances")),
        _g("iam:PassRole", resources=("arn:aws:iam::*:role/trainctl/*",), condition=EC2_PASS,
           why="only trainctl's per-job node roles, only to EC2"))),
    # `launch --buy-capacity-block`: the blocks the account holds (the plan offers them; never bought twice), the purchase
    # (its reservation carries the job tag: PurchaseCapacityBlock's capacity-reservation takes aws:RequestTag,
    # Service Authorization Reference), and RunInstances into it (RunInstances' capacity-reservation resource takes
    # aws:ResourceTag); the other resources of that RunInstances are CreateFleet's grants above
    Call("ec2:DescribeCapacityReservations", BOTH, (_g("ec2:DescribeCapacityReservations", why=DESCRIBE),)),
    Call("ec2:PurchaseCapacityBlock", E2, (
        _g("ec2:PurchaseCapacityBlock", resources=(f"{EC2}:capacity-reservation/*",), condition=TAGGED_REQUEST,
           why="only a block bought with the job tag"),
        _g("ec2:CreateTags", resources=(f"{EC2}:capacity-reservation/*",),
           condition=_create_action("PurchaseCapacityBlock")))),
    Call("ec2:RunInstances", E2, (_g("ec2:RunInstances", resources=(f"{EC2}:capacity-reservation/*",),
                                     condition=TAGGED_RESOURCE, why="only into a block trainctl bought"),)),
    # the job's log group, made by the launch so that it has a retention (the nodes' agents then find it)
    Call("logs:CreateLogGroup", E2, (_g("logs:CreateLogGroup", "logs:TagResource", resources=(
        "arn:aws:logs:*:*:log-group:/trainctl/*",), condition=TAGGED_REQUEST),)),
    Call("logs:PutRetentionPolicy", E2, (_g("logs:PutRetentionPolicy", resources=(
        "arn:aws:logs:*:*:log-group:/trainctl/*",)),)),
    Call("ec2:CreateTags", E2, (_g("ec2:CreateTags", resources=(f"{EC2}:instance/*",), condition=TAGGED_RESOURCE,
                                   why="marks instances trainctl terminates itself"),)),
    Call("ec2:TerminateInstances", E2, (_g("ec2:TerminateInstances", resources=(f"{EC2}:instance/*",),
                                           condition=TAGGED_RESOURCE),)),
    Call("ec2:DeleteFleets", E2, (_g("ec2:DeleteFleets", resources=(f"{EC2}:fleet/*",), condition=TAGGED_RESOURCE),)),
    Call("ec2:DeleteLaunchTemplate", E2, (_g("ec2:DeleteLaunchTemplate", resources=(f"{EC2}:launch-template/*",),
                                             condition=TAGGED_RESOURCE),)),
    Call("ec2:DeletePlacementGroup", E2, (_g("ec2:DeletePlacementGroup", resources=(f"{EC2}:placement-group/*",),
                                             condition=TAGGED_RESOURCE),)),
    # `ls --all` and a job this machine did not launch: the regions of the account's trainctl buckets
    # (ListAllMyBuckets takes no resource: "*", limited to the caller's own account by s3:ResourceAccount)
    Call("s3:ListBuckets", BOTH, (_g("s3:ListAllMyBuckets", condition=SAME_ACCOUNT,
                                     why="trainctl asks for its own buckets (Prefix trainctl-ACCOUNT-) only"),)),
    Call("s3:GetObject", BOTH, (_g("s3:GetObject", **ON_OBJECTS),)),  # EC2's markers; `fetch` on both
    Call("s3:ListObjectsV2", BOTH, (_g("s3:ListBucket", **ON_BUCKET),)),
    # `launch --resume-from JOB`: the earlier job's checkpoints copied into the new job's folder (S3 User Guide,
    # CopyObject: s3:GetObject on the source and s3:PutObject on the target)
    Call("s3:CopyObject", BOTH, (_g("s3:GetObject", "s3:PutObject", **ON_OBJECTS),)),
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
    *(Call(f"iam:{op}", platforms, (_g(f"iam:{op}", resources=("arn:aws:iam::*:role/trainctl/*",)),))
      for op, platforms in (("DeleteRolePolicy", BOTH), ("ListRoleTags", BOTH), ("ListRolePolicies", BOTH),
                            ("ListAttachedRolePolicies", BOTH), ("DetachRolePolicy", BOTH),
                            ("ListInstanceProfilesForRole", E2), ("DeleteRole", BOTH))),
    *(Call(f"iam:{op}", E2, (_g(f"iam:{op}", *extra, resources=("arn:aws:iam::*:instance-profile/trainctl/*",)),))
      for op, extra in (("CreateInstanceProfile", ("iam:TagInstanceProfile",)), ("DeleteInstanceProfile", ()),
                        ("RemoveRoleFromInstanceProfile", ()), ("AddRoleToInstanceProfile", ()))),
    # EC2 needs the Spot service-linked role before the first Spot request (EC2 User Guide, "Service-linked role
    # for Spot Instance requests"); a Spot launch creates it when missing, and may create nothing else.
    Call("iam:CreateServiceLinkedRole", E2, (_g("iam:CreateServiceLinkedRole", resources=(SPOT_ROLE,),
                                                condition={"StringLike": {"iam:AWSServiceName": "spot.amazonaws.com"}}),)),
    Call("iam:ListRoles", E2, (_g("iam:ListRoles", why="listing takes no resource; trainctl asks for /trainctl/ only"),)),
    Call("iam:ListInstanceProfiles", E2, (_g("iam:ListInstanceProfiles",
                                             why="listing takes no resource; trainctl asks for /trainctl/ only"),)),
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
