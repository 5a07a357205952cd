"""What both backends' launches need alike: the job's maximum runtime, and the permissions boundary every
role trainctl creates carries (checked before a role is made: that it exists, and that it lets the role read the
job's data)."""
from __future__ import annotations

from trainctl.aws import clients as aws
from trainctl.errors import TrainctlError, UsageError
from trainctl.iam import BOUNDARY_POLICY
from trainctl.iam.boundary import boundary_arn
from trainctl.naming import resources as naming

MAX_SECONDS = 2419200  # SageMaker's limit on MaxRuntime and MaxWait (28 days); EC2 nodes stop at the same bound


def max_runtime_s(option, max_runtime_hours: float | None) -> int:
    if max_runtime_hours:
        seconds = int(max_runtime_hours * 3600)
    else:  # twice the expected billed hours and half an hour: room for a slow start, not for a hung job
        seconds = int((option.hours or 1.0) * 2 * 3600) + 1800
    return max(60, min(MAX_SECONDS, seconds))


def boundary(iam, account: str, region: str, notes: list[str], role: str = "node role",
             reads: tuple[tuple[str, str], ...] = ()) -> str:
    """The ARN of trainctl's permissions boundary, which every role trainctl creates carries; an
    administrator creates it once (the cli policy may not), so a missing one is an error with the fix. `reads`:
    the (bucket, prefix) of the job's S3 data, which the boundary must admit or the job fails reading it, billed."""
    arn = boundary_arn(account, naming.partition(region))
    try:
        default = iam.get_policy(PolicyArn=arn)["Policy"].get("DefaultVersionId")
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) == "NoSuchEntity":
            raise TrainctlError(f"permissions boundary {arn} does not exist: an administrator creates it once with "
                                f"`trainctl iam-policy --role boundary > b.json && aws iam create-policy "
                                f"--policy-name {BOUNDARY_POLICY} --policy-document file://b.json` "
                                "(docs/security.md)") from None
        if aws.error_code(e) not in ("AccessDenied", "AccessDeniedException"):
            raise
        default = None
    notes.append(f"{role} bounded by {arn}")
    if reads:
        _admits_data(iam, arn, default, reads, region, notes)
    return arn


def _admits_data(iam, arn: str, version: str | None, reads, region: str, notes: list[str]) -> None:
    """Refuses in one line when the boundary lets no role read a data bucket of the job (an administrator names
    each data bucket: `iam-policy --role boundary --data-bucket B`); a note when it could not be read."""
    import json
    from urllib.parse import unquote

    from trainctl.iam.admits import allows
    from trainctl.naming.resources import s3_arn

    try:
        document = iam.get_policy_version(PolicyArn=arn, VersionId=version)["PolicyVersion"]["Document"]
    except Exception as e:  # noqa: BLE001 - no version known, or not allowed to read it: say so and go on
        notes.append(f"could not read the boundary's policy ({aws.error_code(e) or 'no version'}) to check that it "
                     "lets the job's role read its data")
        return
    document = json.loads(unquote(document)) if isinstance(document, str) else document
    buckets = sorted({b for b, _ in reads})
    for bucket, prefix in sorted(reads):
        # the boundary's ARNs may be written arn:aws: whatever the partition (iam-policy rewrites them on request)
        arns = {s3_arn(region, bucket), f"arn:aws:s3:::{bucket}"}
        if not any(allows(document, "s3:GetObject", f"{a}/{prefix}x") and allows(document, "s3:ListBucket", a)
                   for a in arns):
            raise UsageError(
                f"data: s3://{bucket}/{prefix}: the permissions boundary {arn} does not let the job's role read "
                f"bucket {bucket}, so the job would start, be billed and fail reading it; an administrator admits it "
                f"(trainctl iam-policy --role boundary {' '.join('--data-bucket ' + b for b in buckets)} > b.json "
                f"&& aws iam create-policy-version --policy-arn {arn} --policy-document file://b.json "
                "--set-as-default)")
    notes.append(f"the boundary lets the job's role read {', '.join('s3://' + b for b in buckets)}")
