"""Which AWS call a raw HTTP request is, and how AWS words an error for that call's protocol.

The sandbox's middleware applies fault switches to every call, moto's and the extensions' alike,
so it must name the operation of any request (EC2/IAM put it in the form field `Action`, JSON
services in the `X-Amz-Target` header, REST services in method + path) and answer an error in the
exact shape botocore parses for that protocol: otherwise botocore would not see a throttle as a
throttle, and its retry logic would not be exercised.
"""
from __future__ import annotations

import io
import json
import re
import uuid
from dataclasses import dataclass
from html import escape
from urllib.parse import parse_qs

# Signing name (from the credential scope) -> botocore service name, where they differ.
_SERVICE_NAMES = {"servicequotas": "service-quotas", "monitoring": "cloudwatch", "states": "stepfunctions",
                  "tagging": "resourcegroupstaggingapi"}
_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/([^/]+)/([^/]+)/aws4_request")


# Returned by an extension's JSON operation to let moto answer the call after all.
NOT_HANDLED = object()


class AwsError(Exception):
    """An error answered to the client in its protocol's shape (code, message, HTTP status)."""

    def __init__(self, code: str, message: str, status: int = 400):
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.status = code, message, status


@dataclass(frozen=True)
class AwsCall:
    service: str       # botocore service name: "ec2", "pricing", "service-quotas", "s3", ...
    region: str
    operation: str     # "RunInstances"; a REST call moto cannot name is "GET /path"
    protocol: str      # "ec2" | "query" | "json" | "rest-xml" | "rest-json"

    @property
    def qualified(self) -> str:
        return f"{self.service}:{self.operation}"


def request_body(environ: dict) -> bytes:
    """Read the request body and put it back, so that moto can still read it."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    return body


def identify(environ: dict) -> AwsCall | None:
    """Name the AWS call of a request, or None when it is not a signed AWS API call."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    m = _SCOPE.search(auth)
    if not m:
        qs = parse_qs(environ.get("QUERY_STRING", ""))
        cred = (qs.get("X-Amz-Credential") or [""])[0]  # presigned URLs carry the scope in the query
        parts = cred.split("/")
        if len(parts) != 5:
            return None
        region, signing = parts[2], parts[3]
    else:
        region, signing = m.group(1), m.group(2)
    service = _SERVICE_NAMES.get(signing, signing)

    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return AwsCall(service, region, target.rsplit(".", 1)[-1], "json")
    if environ.get("CONTENT_TYPE", "").startswith("application/x-www-form-urlencoded"):
        form = parse_qs(request_body(environ).decode("utf-8", "replace"))
        action = (form.get("Action") or [""])[0]
        if action:
            return AwsCall(service, region, action, "ec2" if service == "ec2" else "query")
    method = environ.get("REQUEST_METHOD", "GET")
    path = environ.get("PATH_INFO", "/")
    protocol = "rest-xml" if service in ("s3", "route53", "cloudfront", "s3control") else "rest-json"
    return AwsCall(service, region, _rest_operation(service, environ) or f"{method} {path}", protocol)


_routers: dict[str, object] = {}


def _rest_operation(service: str, environ: dict) -> str | None:
    """Operation of a REST call, matched against the service model by moto's own router."""
    try:
        from moto.core.request import Request  # the router reads moto's raw_path, which werkzeug's lacks
        from moto.core.routing import get_service_router

        router = _routers.get(service)
        if router is None:
            router = _routers[service] = get_service_router(service)
        operation, _ = router.match(Request(environ.copy()))
        return operation.name
    except Exception:  # noqa: BLE001 - an unknown REST call still gets a generic name, never an error
        return None


def request_id() -> str:
    return str(uuid.uuid4())


def json_response(payload: dict, status: int = 200) -> tuple[int, list[tuple[str, str]], bytes]:
    body = json.dumps(payload).encode()
    return status, [("Content-Type", "application/x-amz-json-1.1"), ("x-amzn-RequestId", request_id()),
                    ("Content-Length", str(len(body)))], body


def error_response(call: AwsCall, code: str, message: str, status: int) -> tuple[int, list[tuple[str, str]], bytes]:
    """The error body and headers AWS sends for `call`'s protocol (what botocore's parsers expect)."""
    rid = request_id()
    msg = escape(message, quote=False)
    if call.protocol == "ec2":
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
                f"<Message>{msg}</Message></Error></Errors><RequestID>{rid}</RequestID></Response>")
        headers = [("Content-Type", "text/xml;charset=UTF-8")]
    elif call.protocol == "query":
        fault = "Receiver" if status >= 500 else "Sender"
        body = (f"<ErrorResponse><Error><Type>{fault}</Type><Code>{code}</Code><Message>{msg}</Message>"
                f"</Error><RequestId>{rid}</RequestId></ErrorResponse>")
        headers = [("Content-Type", "text/xml")]
    elif call.protocol == "rest-xml":
        body = f"<Error><Code>{code}</Code><Message>{msg}</Message><RequestId>{rid}</RequestId></Error>"
        headers = [("Content-Type", "application/xml")]
    else:
        body = json.dumps({"__type": code, "message": message})
        headers = [("Content-Type", "application/x-amz-json-1.1"), ("X-Amzn-ErrorType", code)]
    data = body.encode()
    headers += [("x-amzn-RequestId", rid), ("Content-Length", str(len(data)))]
    return status, headers, data


def throttle_error(call: AwsCall) -> tuple[str, str, int]:
    """(code, message, HTTP status) that the real service answers when it throttles this call."""
    if call.protocol == "ec2":
        return "RequestLimitExceeded", "Request limit exceeded.", 503
    if call.protocol == "query":
        return "Throttling", "Rate exceeded", 400
    if call.protocol == "rest-xml":
        return "SlowDown", "Please reduce your request rate.", 503
    return "ThrottlingException", "Rate exceeded", 400
