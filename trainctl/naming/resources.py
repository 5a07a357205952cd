"""Every name trainctl gives an AWS resource, built here and kept within AWS's limits.

One job name serves the role, the instance profile, the launch template, the placement group and the
security group, so it must fit the tightest of their limits: an IAM role name has at most 64 characters
(IAM User Guide, "IAM object quotas": role name 64; instance profile 128; EC2 launch template name 128,
placement group 255, security group 255). A name that would be longer keeps its start and ends with a
hash of the whole, so two long job ids never share a name.
"""
from __future__ import annotations

import hashlib

from trainctl.catalog.regions import arn, partition_of, s3_arn  # noqa: F401 (re-exported)

PREFIX = "trainctl-"
IAM_PATH = "/trainctl/"
ROLE_NAME_MAX = 64                   # IAM: role names are at most 64 characters
TRAINING_JOB_NAME_MAX = 63           # SageMaker CreateTrainingJob: TrainingJobName {1,63}
SAGEMAKER_LOG_GROUP = "/aws/sagemaker/TrainingJobs"   # where SageMaker writes every training job's logs


def fit(name: str, limit: int) -> str:
    """`name` if it fits, else its first characters and 8 hex digits of its sha256 (deterministic)."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:limit - 9].rstrip('-')}-{digest}"


def job_resource_name(job_id: str) -> str:
    """The name of the job's role, instance profile, launch template, placement group and security group."""
    return fit(PREFIX + job_id, ROLE_NAME_MAX)


def training_job_name(job_id: str) -> str:
    return fit(job_id, TRAINING_JOB_NAME_MAX)


def ec2_log_group(job_id: str) -> str:
    """CloudWatch Logs group of an EC2 job's nodes (one stream per instance)."""
    return f"/trainctl/{job_id}"


# ARNs carry the region's partition, read from botocore's partition data (trainctl/catalog/regions.py)
partition = partition_of
