"""The instance metadata service (IMDS) of every sandbox instance, served by the sandbox itself under
`/_trainctl/imds/<instance id>/` (what http://169.254.169.254/ is inside an EC2 instance).

As EC2 serves it (EC2 User Guide, "Use the Instance Metadata Service to access instance metadata" and
"instancedata-data-retrieval"):
- IMDSv2: `PUT /latest/api/token` with `X-aws-ec2-metadata-token-ttl-seconds` (1-21600) gives a session token;
  a GET carries it in `X-aws-ec2-metadata-token`. Without the TTL header the PUT is refused (400); a GET
  without a valid token is refused (401) when the instance's MetadataOptions say HttpTokens=required.
- the categories a node agent and boto3 read: instance-id, instance-type, ami-id, local-ipv4,
  placement/availability-zone(-id), placement/region, spot/instance-action (404 until EC2 posts a Spot
  interruption notice: interrupts.py), iam/info and iam/security-credentials/<role> (the instance profile's
  role, with temporary credentials: the sandbox's fake keys).
"""
from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

from trainctl_sandbox.server.context import IMDS_PREFIX as PREFIX
from trainctl_sandbox.server.context import SandboxContext

MAX_TTL_S = 21600

_lock = threading.Lock()
_tokens: dict[str, tuple[str, float]] = {}   # token -> (instance id, expiry)


def endpoint(ctx: SandboxContext, instance_id: str) -> str:
    """The base URL a node uses in place of http://169.254.169.254."""
    return f"{ctx.endpoint_url}{PREFIX}{instance_id}"


def _find(ctx: SandboxContext, instance_id: str) -> tuple[Any, Any] | None:
    from moto.ec2.models import ec2_backends

    for region in ctx.regions:
        backend = ec2_backends[ctx.account_id][region]
        for instance in backend.all_instances():
            if instance.id == instance_id:
                return backend, instance
    return None


def _role(ctx: SandboxContext, backend: Any, instance: Any) -> tuple[str, str] | None:
    """(role name, instance profile ARN) of the instance's profile, if it has one with a role."""
    from moto.iam.models import iam_backends

    for assoc in backend.iam_instance_profile_associations.values():
        if assoc.instance_id == instance.id and assoc.state == "associated":
            profile = assoc.iam_instance_profile
            iam = iam_backends[ctx.account_id]["global"]
            live = next((p for p in iam.instance_profiles.values() if p.arn == profile.arn), None)
            roles = (live or profile).roles
            return (roles[0].name, profile.arn) if roles else None
    return None


def _credentials() -> dict[str, str]:
    from trainctl_sandbox.server.process import FAKE_ACCESS_KEY, FAKE_SECRET_KEY

    now = datetime.now(timezone.utc)
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    return {"Code": "Success", "LastUpdated": now.strftime(stamp), "Type": "AWS-HMAC",
            "AccessKeyId": FAKE_ACCESS_KEY, "SecretAccessKey": FAKE_SECRET_KEY,
            "Token": "sandbox-instance-session", "Expiration": (now + timedelta(hours=6)).strftime(stamp)}


def _item(ctx: SandboxContext, backend: Any, instance: Any, key: str) -> str | None:
    from trainctl_sandbox.ec2 import interrupts as ec2_interrupts
    from trainctl_sandbox.server import ec2_data

    az = instance.placement.zone if hasattr(instance.placement, "zone") else instance.placement
    values = {"instance-id": instance.id, "instance-type": instance.instance_type, "ami-id": instance.image_id,
              "local-ipv4": instance.private_ip, "placement/availability-zone": az,
              "placement/availability-zone-id": ec2_data.zone_id(az) or "", "placement/region": backend.region_name,
              "instance-life-cycle": "spot" if getattr(instance, "lifecycle", None) == "spot" else "on-demand"}
    if key in values:
        return values[key]
    if key == "spot/instance-action":
        notice = ec2_interrupts.notice_of(instance.id)
        return json.dumps(notice) if notice else None
    role = _role(ctx, backend, instance)
    if role and key == "iam/security-credentials/":
        return role[0]
    if role and key == f"iam/security-credentials/{role[0]}":
        return json.dumps(_credentials())
    if role and key == "iam/info":
        return json.dumps({"Code": "Success", "InstanceProfileArn": role[1], "InstanceProfileId": "AIPASANDBOX"})
    return None


def _send(start_response: Callable, status: int, body: str = "") -> Iterable[bytes]:
    data = body.encode()
    phrases = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed"}
    start_response(f"{status} {phrases[status]}", [("Content-Type", "text/plain"), ("Content-Length", str(len(data)))])
    return [data]


def answer(ctx: SandboxContext, environ: dict, start_response: Callable) -> Iterable[bytes]:
    instance_id, _, path = environ.get("PATH_INFO", "")[len(PREFIX):].partition("/")
    found = _find(ctx, instance_id)
    if found is None:
        return _send(start_response, 404)  # no such instance: nothing answers there
    backend, instance = found
    method = environ.get("REQUEST_METHOD")
    if method == "PUT" and path == "latest/api/token":
        try:
            ttl = int(environ.get("HTTP_X_AWS_EC2_METADATA_TOKEN_TTL_SECONDS") or "")
        except ValueError:
            return _send(start_response, 400)
        if not 1 <= ttl <= MAX_TTL_S:
            return _send(start_response, 400)
        token = secrets.token_urlsafe(32)
        with _lock:
            _tokens[token] = (instance.id, time.time() + ttl)
        return _send(start_response, 200, token)
    if method != "GET" or not path.startswith("latest/meta-data/"):
        return _send(start_response, 405 if method != "GET" else 404)
    with _lock:
        owner, expiry = _tokens.get(environ.get("HTTP_X_AWS_EC2_METADATA_TOKEN", ""), ("", 0.0))
    valid = owner == instance.id and expiry > time.time()
    if not valid and getattr(instance.metadata_options, "http_tokens", "optional") == "required":
        return _send(start_response, 401)
    value = _item(ctx, backend, instance, path.removeprefix("latest/meta-data/"))
    return _send(start_response, 200, value) if value is not None else _send(start_response, 404)


PATHS = {PREFIX: answer}  # the server sends every request under the prefix here, once EC2 is warm


def reset(ctx: SandboxContext) -> None:
    with _lock:
        _tokens.clear()
