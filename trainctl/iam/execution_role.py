"""The execution role of one SageMaker job: its trust policy and what the job's container may do (written per
job by the SageMaker launch under /trainctl/ with the permissions boundary; backends/sagemaker/role.py)."""
from __future__ import annotations

import re

from trainctl.iam.boundary import data_decrypt_statements, data_read_statements, secret_statements
from trainctl.naming.resources import SAGEMAKER_LOG_GROUP, arn, s3_arn

_ECR_IMAGE = re.compile(r"^(\d{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/([^:@]+)")
SAGEMAKER_TRUST = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]}


def image_repository(image: str, region: str) -> str:
    """The ECR repository ARN of the training image, or "*" for an image elsewhere (then ECR decides)."""
    m = _ECR_IMAGE.match(image)
    return arn(m.group(2), "ecr", m.group(1), f"repository/{m.group(3)}") if m else "*"


def execution_policy(job_id: str, bucket: str, region: str, account: str, code_key: str, image: str,
                     secrets: tuple[str, ...] = (), in_vpc: bool = False,
                     data: tuple[tuple[str, str], ...] = (), data_keys: tuple[str, ...] = ()) -> dict:
    """What one job's container may do: read its code (by content hash) and its own prefix, write only its
    own checkpoints/ and output/, SageMaker's log group and metrics, pull its image, its network
    interfaces when in a VPC, exactly its secrets, and read its input data: each (bucket, prefix) of `data`.
    Always within the boundary (iam/boundary.py)."""
    own = {"StringEquals": {"s3:ResourceAccount": account}}
    obj = lambda key: s3_arn(region, f"{bucket}/{key}")  # noqa: E731
    group = arn(region, "logs", account, f"log-group:{SAGEMAKER_LOG_GROUP}")
    statements = [
        {"Sid": "ReadCodeAndJob", "Effect": "Allow", "Action": "s3:GetObject", "Condition": own,
         "Resource": [obj(code_key), obj(f"{job_id}/*")]},
        {"Sid": "WriteJobFolders", "Effect": "Allow", "Action": ["s3:PutObject", "s3:AbortMultipartUpload"],
         "Condition": own,
         "Resource": [obj(f"{job_id}/checkpoints/*"), obj(f"{job_id}/output/*"), obj(f"{job_id}/tensorboard/*")]},
        {"Sid": "PruneJobCheckpoints", "Effect": "Allow", "Action": "s3:DeleteObject", "Condition": own,
         "Resource": obj(f"{job_id}/checkpoints/*")},
        {"Sid": "ListJobPrefix", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": s3_arn(region, bucket),
         "Condition": {**own, "StringLike": {"s3:prefix": [f"{job_id}/*"]}}},
        # SageMaker's guide scopes the logs actions to "*" only; the group is as narrow as it vouches for
        {"Sid": "Logs", "Effect": "Allow", "Resource": f"{group}:*", "Action": [
            "logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"]},
        {"Sid": "Metrics", "Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
         "Condition": {"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}}},
        {"Sid": "EcrToken", "Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
        {"Sid": "PullImage", "Effect": "Allow", "Resource": image_repository(image, region),
         "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"]},
    ]
    if in_vpc:  # SageMaker Developer Guide, train-vpc: the job's interfaces in the given subnets
        statements.append({"Sid": "VpcInterfaces", "Effect": "Allow", "Resource": "*", "Action": [
            "ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
            "ec2:DeleteNetworkInterfacePermission", "ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcs",
            "ec2:DescribeDhcpOptions", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups"]})
    statements += data_read_statements(data, region) + data_decrypt_statements(data_keys, region)
    statements += secret_statements([a for a in secrets if ":ssm:" in a], [a for a in secrets if ":secretsmanager:" in a])
    return {"Version": "2012-10-17", "Statement": statements}
