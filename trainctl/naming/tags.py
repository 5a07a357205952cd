"""The tag keys trainctl puts on AWS resources. `trainctl:job` on every one of them: `trainctl down` finds a
job's resources by it, and the IAM policies scope changes to resources that carry it."""
from __future__ import annotations

JOB_TAG = "trainctl:job"
# IAM roles only: the spec whose job the role serves; the permissions boundary lets a role read only the secrets
# named under trainctl/<that spec>/ (iam/boundary.py), so one spec's jobs cannot read another spec's secrets
SPEC_TAG = "trainctl:spec"
# EC2 instances only: what the node agent and trainctl record on the instance itself
STATE_TAG = "trainctl:state"            # set to "interrupted" by a node's agent on a Spot notice
TERMINATED_BY_TAG = "trainctl:terminated-by"  # set before trainctl terminates an instance itself
NODES_TAG = "trainctl:nodes"
MARKET_TAG = "trainctl:market"
