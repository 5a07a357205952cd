"""S3 requests signed with an assumed role's credentials are decided by the role's identity policies, as IAM
decides them: allowed only when a statement allows the action on the resource and none denies it; otherwise 403
AccessDenied (IAM User Guide, "Policy evaluation logic": an implicit deny unless an identity-based policy allows).

moto checks no policy (its IAM enforcement is all or nothing, and the sandbox's own callers sign with a fake key
that is no IAM user's), so the sandbox decides here, for the credentials `sts:AssumeRole` gave only: a test that
assumes a role (a colleague's `viewer` role) meets AWS's answer; every other caller is the account's administrator,
as before. The statements are matched by moto's policy matcher (Action, Resource, Condition) after the policy
variables the request context fills are replaced (IAM User Guide, "IAM policy elements: Variables and tags":
${aws:PrincipalAccount}, ${aws:username}). S3's action and resource per operation: Service Authorization Reference,
Amazon S3 (HeadObject is authorized as s3:GetObject, ListObjects(V2) and HeadBucket as s3:ListBucket).
"""
from __future__ import annotations

import json
import re
from urllib.parse import unquote

from trainctl_sandbox.server import s3_checks

AS_ACTION = {"HeadObject": "GetObject", "ListObjectsV2": "ListBucket", "ListObjects": "ListBucket",
             "HeadBucket": "ListBucket", "ListBuckets": "ListAllMyBuckets", "GetObjectAttributes": "GetObject"}
CREDENTIAL = re.compile(r"Credential=([A-Z0-9]+)/")


def _access_key(environ: dict) -> str | None:
    found = CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", "")) or CREDENTIAL.search(
        "Credential=" + unquote(environ.get("QUERY_STRING", "")).partition("X-Amz-Credential=")[2])
    return found.group(1) if found else None


def _assumed_role(account: str, access_key: str):
    from moto.sts.models import sts_backends

    return next((r for r in sts_backends[account]["aws"].assumed_roles if r.access_key_id == access_key), None)


def _policies(account: str, role_arn: str) -> list[dict]:
    from moto.iam.models import iam_backends

    iam = iam_backends[account]["global"]
    role = next((r for r in iam.roles.values() if r.arn == role_arn.replace(":assumed-role/", ":role/")), None)
    if role is None:
        return []
    docs = [unquote(doc) if isinstance(doc, str) else json.dumps(doc) for doc in role.policies.values()]
    docs += [p.default_version.document for p in role.managed_policies.values()]
    return [json.loads(doc) for doc in docs]


def _target(operation: str, environ: dict) -> tuple[str, str]:
    bucket = s3_checks.bucket_name(environ) or ""
    path = unquote(environ.get("PATH_INFO", "/")).lstrip("/")
    key = path.split("/", 1)[1] if path.startswith(f"{bucket}/") else ("" if path == bucket else path)
    action = "s3:" + AS_ACTION.get(operation, operation)
    if operation == "ListBuckets":
        return action, "*"
    return action, f"arn:aws:s3:::{bucket}/{key}" if key else f"arn:aws:s3:::{bucket}"


def refusal(call, environ: dict, account: str) -> tuple[str, str, int] | None:
    """(code, message, status) when an assumed role's policies do not allow this S3 request, else None."""
    from moto.iam.access_control import IAMPolicy, PermissionResult
    from moto.s3.models import s3_backends

    access_key = _access_key(environ)
    role = _assumed_role(account, access_key) if access_key else None
    if role is None:
        return None
    action, resource = _target(call.operation, environ)
    bucket = s3_checks.bucket_name(environ)
    owner = (s3_backends.bucket_accounts.get(bucket) or ("aws", account))[1] if bucket else account
    context = {"aws:PrincipalAccount": account, "s3:ResourceAccount": owner, "aws:username": role.session_name}
    results = []
    for doc in _policies(account, role.role_arn):
        text = json.dumps(doc)
        for name, value in context.items():
            text = text.replace("${" + name + "}", value)
        results.append(IAMPolicy(text).is_action_permitted(action, resource, incoming_condition_values=context))
    if PermissionResult.DENIED not in results and PermissionResult.PERMITTED in results:
        return None
    return ("AccessDenied", f"User: {role.arn} is not authorized to perform: {action} on resource: \"{resource}\" "
            f"because no identity-based policy allows the {action} action", 403)
