"""What every trainctl policy document shares: the names it scopes to and the conditions it scopes with."""
from __future__ import annotations

from trainctl.catalog.platforms import NAMES
from trainctl.naming.tags import JOB_TAG

BUCKET = "trainctl-*"            # the job bucket: trainctl-ACCOUNT-REGION
EXECUTION_ROLE = "trainctl-sagemaker-execution"
NODE_PATH = "/trainctl/"         # the EC2 backend's per-job roles and instance profiles live under this path
PLATFORMS = NAMES               # the registered platforms (catalog/platforms.py)
ROLES = ("cli", "viewer", "sagemaker-execution", "ec2-node", "boundary")

# Conditions, by name (kept as data so statements with the same scoping merge)
TAGGED_REQUEST = {"Null": {f"aws:RequestTag/{JOB_TAG}": "false"}}     # creating: must carry the job tag
TAGGED_RESOURCE = {"Null": {f"aws:ResourceTag/{JOB_TAG}": "false"}}   # changing: must already carry it
# S3: only buckets this account owns (the bucket name is predictable; another account may own it)
SAME_ACCOUNT = {"StringEquals": {"s3:ResourceAccount": "${aws:PrincipalAccount}"}}
# IAM: a role trainctl creates or changes must carry trainctl's permissions boundary (iam/boundary.py).
# iam:PermissionsBoundary is an ARN-typed key (Service Authorization Reference, IAM condition keys): the ARN
# operators compare it, ArnNotEquals in the denies of iam/boundary.py.
BOUNDARY_POLICY = "trainctl-boundary"
BOUNDARY_ARN = f"arn:aws:iam::${{aws:PrincipalAccount}}:policy/{BOUNDARY_POLICY}"
WITH_BOUNDARY = {"ArnEquals": {"iam:PermissionsBoundary": BOUNDARY_ARN}}
MANAGED_POLICY_LIMIT = 6144      # characters of a managed policy, whitespace not counted (IAM quotas)
