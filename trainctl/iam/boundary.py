"""The permissions boundary of every role trainctl creates (the EC2 nodes' and the SageMaker jobs' execution
roles, one per job) and the statements that keep it in place.

Why a boundary: the cli policy lets its holder create roles under /trainctl/ and write their inline policy
(the EC2 backend makes one role per job). Without a boundary, that is a way to become admin: create a role
trusting yourself, give it `*:*`, assume it. With `iam:PermissionsBoundary` required on CreateRole and
PutRolePolicy, whatever policy such a role gets, it can do at most what `boundary_policy()` allows: read and
write the account's trainctl job buckets in the job layout, its /trainctl/ log groups and SageMaker's
training log group, describe instances, mark an instance interrupted, read the secrets of its own spec
(named under trainctl/<spec>/, matched to the role's trainctl:spec tag), and what a SageMaker training job
needs besides (its metrics, pulling its image, its VPC interfaces). The deny statements of
`cli_denies()` keep the holder from removing or swapping the boundary, or rewriting the boundary policy.

An administrator creates the boundary once (`trainctl iam-policy --role boundary`, docs/security.md); the
cli policy can neither create nor change it.
"""
from __future__ import annotations

from trainctl.iam.constants import BOUNDARY_ARN, BOUNDARY_POLICY, BUCKET, SAME_ACCOUNT, WITH_BOUNDARY
from trainctl.naming.tags import SPEC_TAG

S3_BUCKET = f"arn:aws:s3:::{BUCKET}"
ACCOUNT = "${aws:PrincipalAccount}"
TRAINCTL_ROLES = "arn:aws:iam::*:role/trainctl/*"
SAGEMAKER_LOGS = "arn:aws:logs:*:*:log-group:/aws/sagemaker/TrainingJobs:*"
# Secrets a job may be handed (the spec's `secrets:`) live under trainctl/<spec name>/, and every role trainctl
# creates carries its spec's name in the trainctl:spec tag: the boundary names the secrets through that tag, so a
# job role reads only its own spec's secrets whatever its inline policy says (IAM User Guide, "Policy variables":
# permissions boundaries support them; a role without the tag resolves no value and matches no secret).
SPEC_SECRETS = "trainctl/${aws:PrincipalTag/" + SPEC_TAG + "}/*"
SECRET_PARAMETERS = f"arn:aws:ssm:*:{ACCOUNT}:parameter/{SPEC_SECRETS}"
SECRET_VALUES = f"arn:aws:secretsmanager:*:{ACCOUNT}:secret:{SPEC_SECRETS}"
VIA_SECRET_SERVICES = {"StringLike": {"kms:ViaService": ["ssm.*.amazonaws.com", "secretsmanager.*.amazonaws.com"]}}


def image_repositories() -> list[str]:
    """ECR repositories a job role may pull from: those of the accounts trainctl's images come from
    (catalog/images.py) and the caller's own account, for an image of theirs given with --image."""
    from trainctl.catalog.images import image_accounts

    return [f"arn:aws:ecr:*:{a}:repository/*" for a in (*image_accounts(), ACCOUNT)]


def job_objects(*folders: str) -> list[str]:
    """Objects under every job's given folders: `<bucket>/<job>/<folder>/...` for any job."""
    return [f"{S3_BUCKET}/*/{folder}/*" for folder in folders]


def secret_statements(parameters, values, sid: str = "JobSecrets") -> list[dict]:
    """Reading exactly the given SSM parameters and Secrets Manager secrets (and decrypting them through
    those services only)."""
    out = []
    if parameters:
        out.append({"Sid": f"{sid}Parameters", "Effect": "Allow", "Action": "ssm:GetParameter",
                    "Resource": list(parameters)})
    if values:
        out.append({"Sid": f"{sid}Values", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue",
                    "Resource": list(values)})
    if out:
        out.append({"Sid": f"{sid}Decrypt", "Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*",
                    "Condition": VIA_SECRET_SERVICES})
    return out


def data_read_statements(reads, region: str = "", sid: str = "ReadData", account: str | None = None) -> list[dict]:
    """Reading the job's input data: s3:GetObject under each (bucket, prefix) and s3:ListBucket of the bucket
    with the s3:prefix condition (the S3 User Guide's example of listing one folder), nothing else of the bucket.
    The data bucket is the user's own, so no s3:ResourceAccount condition unless `account` is given."""
    from trainctl.naming.resources import s3_arn

    out = []
    for i, (bucket, prefix) in enumerate(sorted(set(reads)), 1):
        bucket_arn = s3_arn(region, bucket) if region else f"arn:aws:s3:::{bucket}"
        own = {"StringEquals": {"s3:ResourceAccount": account}} if account else {}
        out.append({"Sid": f"{sid}Objects{i}", "Effect": "Allow", "Action": "s3:GetObject",
                    "Resource": f"{bucket_arn}/{prefix}*", **({"Condition": own} if own else {})})
        out.append({"Sid": f"{sid}List{i}", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn,
                    "Condition": {**own, "StringLike": {"s3:prefix": [f"{prefix}*"]}}})
    return out


def data_decrypt_statements(keys, region: str, sid: str = "DecryptData") -> list[dict]:
    """kms:Decrypt of the data's SSE-KMS keys, through S3 only (kms:ViaService): what reading an object encrypted
    with a customer managed key needs besides s3:GetObject (S3 User Guide, "Using server-side encryption with AWS
    KMS keys": "you must have permission to use the key"). `keys`: key ARNs, or `alias/NAME` for a key given to
    the bucket by alias, matched with kms:ResourceAliases."""
    via = {"kms:ViaService": f"s3.{region}.amazonaws.com"}
    arns, aliases = sorted(k for k in keys if not k.startswith("alias/")), sorted(k for k in keys if k.startswith("alias/"))
    out = [{"Sid": sid, "Effect": "Allow", "Action": "kms:Decrypt", "Resource": arns,
            "Condition": {"StringEquals": via}}] if arns else []
    if aliases:
        out.append({"Sid": f"{sid}ByAlias", "Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*",
                    "Condition": {"StringEquals": via, "ForAnyValue:StringEquals": {"kms:ResourceAliases": aliases}}})
    return out


def boundary_policy(data_buckets: tuple[str, ...] = ()) -> dict:
    """The most any role trainctl creates may do, whatever its own policy says. `data_buckets`: the buckets
    an administrator lets jobs read their input from (`trainctl iam-policy --role boundary --data-bucket B`),
    read-only; without them a job role reads only the trainctl job buckets."""
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ReadJobBuckets", "Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"],
         "Resource": [S3_BUCKET, f"{S3_BUCKET}/*"], "Condition": SAME_ACCOUNT},
        {"Sid": "WriteJobFolders", "Effect": "Allow", "Action": ["s3:PutObject", "s3:AbortMultipartUpload"],
         "Resource": job_objects("checkpoints", "logs", "status", "output", "tensorboard"), "Condition": SAME_ACCOUNT},
        {"Sid": "PruneCheckpoints", "Effect": "Allow", "Action": "s3:DeleteObject",
         "Resource": job_objects("checkpoints"), "Condition": SAME_ACCOUNT},
        {"Sid": "JobLogs", "Effect": "Allow", "Action": ["logs:CreateLogGroup", "logs:CreateLogStream",
                                                          "logs:PutLogEvents", "logs:DescribeLogStreams"],
         "Resource": ["arn:aws:logs:*:*:log-group:/trainctl/*", SAGEMAKER_LOGS]},
        # what a SageMaker job's own execution role needs besides S3 and logs (backends/sagemaker/role.py)
        {"Sid": "SageMakerMetrics", "Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
         "Condition": {"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}}},
        {"Sid": "EcrToken", "Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
        # the images trainctl uses (AWS's Deep Learning Containers accounts) and the account's own (--image)
        {"Sid": "PullTrainingImage", "Effect": "Allow", "Resource": image_repositories(), "Action": [
            "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"]},
        {"Sid": "SageMakerVpcInterfaces", "Effect": "Allow", "Resource": "*", "Action": [
            "ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
            "ec2:DeleteNetworkInterfacePermission", "ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcs",
            "ec2:DescribeDhcpOptions", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups"]},
        {"Sid": "FindPeers", "Effect": "Allow", "Action": "ec2:DescribeInstances", "Resource": "*"},
        {"Sid": "ReadBlockEnd", "Effect": "Allow", "Action": "ec2:DescribeCapacityReservations", "Resource": "*"},
        # an EC2 job's nodes publish its news to the topic given to `launch --notify` (their role names it)
        {"Sid": "JobNews", "Effect": "Allow", "Action": "sns:Publish", "Resource": f"arn:aws:sns:*:{ACCOUNT}:*"},
        {"Sid": "MarkInterrupted", "Effect": "Allow", "Action": "ec2:CreateTags",
         "Resource": "arn:aws:ec2:*:*:instance/*",
         "Condition": {"ForAllValues:StringEquals": {"aws:TagKeys": ["trainctl:state", "trainctl:terminated-by"]}}},
        *replacement_bounds(),
        *secret_statements([SECRET_PARAMETERS], [SECRET_VALUES], sid="Secrets"),
        *data_read_statements([(bucket, "") for bucket in data_buckets], sid="ReadDataBucket"),
        # objects of a data bucket encrypted with the user's own KMS key: decrypted through S3 only, so a role can
        # decrypt no more than the objects it may already read
        *([{"Sid": "ReadDataBucketDecrypt", "Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*",
            "Condition": {"StringLike": {"kms:ViaService": "s3.*.amazonaws.com"}}}] if data_buckets else []),
    ]}


def cli_denies() -> list[dict]:
    """Explicit denies of the cli policy: they hold even if another policy of the same principal allows more."""
    return [
        {"Sid": "RolesKeepTheBoundary", "Effect": "Deny",
         "Action": ["iam:CreateRole", "iam:PutRolePolicy", "iam:AttachRolePolicy", "iam:PutRolePermissionsBoundary"],
         "Resource": TRAINCTL_ROLES, "Condition": {"ArnNotEquals": WITH_BOUNDARY["ArnEquals"]}},
        {"Sid": "BoundaryStays", "Effect": "Deny", "Action": "iam:DeleteRolePermissionsBoundary",
         "Resource": TRAINCTL_ROLES},
        {"Sid": "BoundaryIsFixed", "Effect": "Deny",
         "Action": ["iam:CreatePolicy", "iam:CreatePolicyVersion", "iam:DeletePolicy", "iam:DeletePolicyVersion",
                    "iam:SetDefaultPolicyVersion"],
         "Resource": f"arn:aws:iam::*:policy/{BOUNDARY_POLICY}"},
    ]


def boundary_arn(account: str, partition: str = "aws") -> str:
    return BOUNDARY_ARN.replace("${aws:PrincipalAccount}", account).replace("arn:aws:", f"arn:{partition}:", 1)


def replacement_bounds() -> list[dict]:
    """An EC2 job's survivors replace a reclaimed node (iam/node_role.py narrows each to its own job): launches from
    a trainctl job's launch template only, creating resources that carry a job tag, passing a trainctl role to EC2."""
    launch, job_tag = ["ec2:CreateFleet", "ec2:RunInstances"], "aws:ResourceTag/trainctl:job"
    used = [f"arn:aws:ec2:*:*:{r}/*" for r in ("subnet", "security-group", "placement-group", "key-pair")] + [
        "arn:aws:ec2:*::image/*"]
    return [
        {"Sid": "ReplaceFromJobTemplates", "Effect": "Allow", "Action": launch,
         "Resource": "arn:aws:ec2:*:*:launch-template/*", "Condition": {"Null": {job_tag: "false"}}},
        {"Sid": "ReplaceTaggedResources", "Effect": "Allow", "Action": [*launch, "ec2:CreateTags"],
         "Resource": [f"arn:aws:ec2:*:*:{r}/*" for r in ("fleet", "instance", "volume", "network-interface")],
         "Condition": {"Null": {"aws:RequestTag/trainctl:job": "false"}}},
        {"Sid": "ReplaceWithTemplateResources", "Effect": "Allow", "Action": "ec2:RunInstances", "Resource": used,
         "Condition": {"ArnLike": {"ec2:LaunchTemplate": "arn:aws:ec2:*:*:launch-template/*"}}},
        {"Sid": "FleetUsesTemplateResources", "Effect": "Allow", "Action": "ec2:CreateFleet", "Resource": used},
        {"Sid": "PassJobRolesToEc2", "Effect": "Allow", "Action": "iam:PassRole", "Resource": TRAINCTL_ROLES,
         "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}},
        {"Sid": "EndJobInstances", "Effect": "Allow", "Action": "ec2:TerminateInstances",
         "Resource": "arn:aws:ec2:*:*:instance/*", "Condition": {"Null": {job_tag: "false"}}},
    ]
