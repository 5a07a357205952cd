"""The KMS keys a job's role needs to read its data: a data bucket whose default encryption is SSE-KMS with the
user's own key (customer managed) serves its objects only to a principal that may use that key, so the role
trainctl creates gets kms:Decrypt on it, through S3 only (iam/boundary.py `data_decrypt_statements`).

Read with GetBucketEncryption (S3 API Reference; `ApplyServerSideEncryptionByDefault` {`SSEAlgorithm`
`AES256`|`aws:kms`|`aws:kms:dsse`, `KMSMasterKeyID`}). `aws:kms` without a key id is the AWS managed key
`aws/s3`, whose key policy already lets every principal of the account use it through S3: nothing to grant. The
key id may be given as a key ARN, a key id or an alias (S3 API Reference, `ServerSideEncryptionByDefault`): a key
id is the bucket owner's key in the bucket's region, an alias is matched by kms:ResourceAliases.

What this cannot see: objects uploaded with another key than the bucket's default, and a key policy that does not
let IAM policies grant its use; the launch says so in its note.
"""
from __future__ import annotations

from trainctl.aws import clients as aws
from trainctl.naming.resources import arn

KMS = ("aws:kms", "aws:kms:dsse")
NO_CONFIGURATION = ("ServerSideEncryptionConfigurationNotFoundError",)


def bucket_key(s3, bucket: str, region: str, account: str) -> str | None:
    """The customer managed key of the bucket's default SSE-KMS encryption (an ARN, or alias/NAME), else None."""
    try:
        rules = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) in NO_CONFIGURATION:
            return None
        raise
    for rule in rules:
        default = rule.get("ApplyServerSideEncryptionByDefault") or {}
        key = default.get("KMSMasterKeyID")
        if default.get("SSEAlgorithm") not in KMS or not key or key.endswith("alias/aws/s3"):
            continue
        if key.startswith("arn:") and ":alias/" in key:
            return "alias/" + key.split(":alias/", 1)[1]
        if key.startswith(("arn:", "alias/")):
            return key
        return arn(region, "kms", account, f"key/{key}")
    return None


def data_keys(client_for, region: str, account: str, reads, notes: list[str]) -> tuple[str, ...]:
    """The SSE-KMS keys of the job's data buckets (`reads`: (bucket, prefix) pairs), each named in a note."""
    keys = []
    for bucket in sorted({b for b, _ in reads}):
        try:
            key = bucket_key(client_for("s3", region), bucket, region, account)
        except Exception as e:  # noqa: BLE001 - not allowed to read it: the job may still read plain objects
            if aws.error_code(e) not in ("AccessDenied", "AccessDeniedException"):
                raise
            notes.append(f"s3://{bucket}: could not read its default encryption (s3:GetEncryptionConfiguration); if "
                         "its objects use SSE-KMS with your own key, the job's role cannot decrypt them")
            continue
        if key:
            keys.append(key)
            notes.append(f"s3://{bucket}: SSE-KMS with {key}; the job's role may decrypt through S3 with it "
                         "(kms:Decrypt), if the key's policy lets IAM policies grant its use")
    return tuple(keys)
