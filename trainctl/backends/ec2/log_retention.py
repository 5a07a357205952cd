"""The EC2 job's CloudWatch Logs group and its retention: made by the launch (the nodes' agents find it there).
Named apart from `common.log_group` (the group's name), which the package exports and would shadow a module
of the same name."""
from __future__ import annotations

from trainctl.backends.base import AwsCall
from trainctl.errors import UsageError
from trainctl.backends.ec2.common import log_group
from trainctl.naming.tags import JOB_TAG


# CloudWatch Logs keeps a log group's events forever unless it has a retention policy; `down` leaves the job's
# group for reading later. The values PutRetentionPolicy accepts (CloudWatch Logs API Reference, botocore `Days`).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
                      3288, 3653)
DEFAULT_LOG_RETENTION_DAYS = 90


def log_group_calls(job: str, region: str, days: int | None, notes: list[str]) -> list[AwsCall]:
    """The job's log group, made by the launch (the nodes' agents find it there) with its retention."""
    days = DEFAULT_LOG_RETENTION_DAYS if days is None else days
    if days not in LOG_RETENTION_DAYS:
        near = min(LOG_RETENTION_DAYS, key=lambda d: (abs(d - days), d))
        raise UsageError(f"--log-retention-days {days}: CloudWatch Logs keeps a log group 1, 3, 5, 7, 14, 30, 60, "
                         f"90, 120, 150, 180, 365, ... or 3653 days; use {near}")
    group = log_group(job)
    return [AwsCall("logs", "CreateLogGroup", {"logGroupName": group, "tags": {JOB_TAG: job}}, region,
                    ok_errors=("ResourceAlreadyExistsException",), why="the nodes' log group"),
            AwsCall("logs", "PutRetentionPolicy", {"logGroupName": group, "retentionInDays": days}, region,
                    why=f"kept {days} days")]
