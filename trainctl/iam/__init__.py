"""Pure: every IAM policy document trainctl prints or attaches, from one table of calls.

`calls` (the table of every AWS call the CLI makes and the CLI policy grouped from it), `rows` (a row of that
table, and each backend's own rows, read from its folder's `iam_calls.toml`), `boundary` (the
permissions boundary every role trainctl creates carries, and the denies that keep it), `node_role` (an EC2
job's nodes), `execution_role` (a SageMaker job's container), `documents` (what `trainctl iam-policy` prints:
shapes with placeholders, partitions, managed-policy size and split), `constants` (names and conditions).
"""
from trainctl.iam.boundary import boundary_arn, boundary_policy, cli_denies, secret_statements
from trainctl.iam.calls import CALLS, SPOT_ROLE, calls_for, cli_policy, granted_actions
from trainctl.iam.rows import Call, Grant
from trainctl.iam.constants import (BOUNDARY_ARN, BOUNDARY_POLICY, BUCKET, EXECUTION_ROLE, MANAGED_POLICY_LIMIT,
                                    NODE_PATH, PLATFORMS, ROLES, SAME_ACCOUNT, WITH_BOUNDARY)
from trainctl.iam.documents import (documents, ec2_node_policy, in_partition, policy_size,
                                    sagemaker_execution_policy, split_policy)
from trainctl.iam.execution_role import SAGEMAKER_TRUST, execution_policy
from trainctl.iam.node_role import EC2_TRUST, node_policy
from trainctl.naming.tags import JOB_TAG

__all__ = ["BOUNDARY_ARN", "BOUNDARY_POLICY", "BUCKET", "CALLS", "Call", "EC2_TRUST", "EXECUTION_ROLE", "Grant",
           "JOB_TAG", "MANAGED_POLICY_LIMIT", "NODE_PATH", "PLATFORMS", "ROLES", "SAGEMAKER_TRUST", "SAME_ACCOUNT", "SPOT_ROLE",
           "WITH_BOUNDARY", "boundary_arn", "boundary_policy", "calls_for", "cli_denies", "cli_policy", "documents",
           "ec2_node_policy", "execution_policy", "granted_actions", "in_partition", "node_policy", "policy_size",
           "sagemaker_execution_policy", "secret_statements", "split_policy"]
