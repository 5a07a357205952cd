"""The `viewer` role: read-only access to the account's trainctl jobs, for a colleague who should see them but
not launch, stop or take them down (`trainctl iam-policy --role viewer`).

It is the CLI policy (calls.py) cut down to the calls that `ls --all`, `watch`, `logs`, `cost` and `calibration` make,
and of those only the actions that read (Describe, Get, List; S3 ListBucket on trainctl's buckets of the same
account, GetObject on the jobs' records and status marks and the measurements only: VIEWER_OBJECTS). A viewer's `watch` of a job that ended still shows it; writing its outcome to
the account's records is refused (AccessDenied), and `watch` says so in one line.
"""
from __future__ import annotations

from trainctl.iam.calls import CALLS, S3_OBJECTS, allow_statements
from trainctl.iam.constants import BUCKET
from trainctl.naming.bucket import MEASUREMENTS_PREFIX, RECORD_NAME

# What the read commands call (tests/sandbox/ls/test_shared_jobs.py runs them as a viewer would and checks this)
VIEWER_OPERATIONS = (
    "sts:GetCallerIdentity",
    "resourcegroupstaggingapi:GetResources",
    "s3:ListBuckets", "s3:GetObject", "s3:ListObjectsV2",
    "sagemaker:ListTrainingJobs", "sagemaker:ListTags", "sagemaker:DescribeTrainingJob",
    "ec2:DescribeInstances", "ec2:DescribeFleets", "ec2:DescribeLaunchTemplates",
    "ec2:DescribeLaunchTemplateVersions", "ec2:DescribeSpotPriceHistory",
    "logs:DescribeLogStreams", "logs:FilterLogEvents",
    "ce:GetCostAndUsage",  # `cost`: the billed dollars by the trainctl:job tag
)
READ_VERBS = ("Describe", "Get", "List", "Filter")
# The objects the read commands get: each job's record and status marks, and the measurements; not the job's code,
# checkpoints, data or model (`fetch` is not a viewer's command), which a colleague shown the jobs need not read.
VIEWER_OBJECTS = (f"arn:aws:s3:::{BUCKET}/*/{RECORD_NAME}", f"arn:aws:s3:::{BUCKET}/*/status/*",
                  f"arn:aws:s3:::{BUCKET}/{MEASUREMENTS_PREFIX}*")


def reads(action: str) -> bool:
    """Whether an IAM action only reads (s3:ListBucket lists keys; s3:GetObject reads one)."""
    return action.split(":", 1)[1].startswith(READ_VERBS)


def viewer_policy() -> dict:
    grants = []
    for call in CALLS:
        if call.operation not in VIEWER_OPERATIONS:
            continue
        for grant in call.grants:
            kept = tuple(a for a in grant.actions if reads(a))
            if kept:
                resources = VIEWER_OBJECTS if grant.resources == (S3_OBJECTS,) else grant.resources
                grants.append(grant.__class__(kept, resources, grant.condition, grant.why))
    return {"Version": "2012-10-17", "Statement": allow_statements(grants)}
