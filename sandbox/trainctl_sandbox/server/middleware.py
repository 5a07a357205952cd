"""The WSGI application in front of moto: admin endpoint, fault switches, and the APIs moto lacks.

Every request passes here first. Admin calls (`POST /_trainctl/admin/<action>`, JSON in and out)
never reach moto. An AWS call is named (protocol.identify), waits for the warm-up if its service
needs EC2, then gets the added latency and, if switched on, the throttling error its service
really sends; JSON-protocol operations that an extension answers (Pricing, Service Quotas) are
answered here; everything else goes to moto's own dispatcher, whose EC2 actions the EC2
extensions have patched.
"""
from __future__ import annotations

import json
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

from trainctl_sandbox.server import backend_lock, s3_checks, s3_iam, strict_requests
from trainctl_sandbox.server.call_log import ACTION as CALL_LOG_ACTION
from trainctl_sandbox.server.call_log import CallLog
from trainctl_sandbox.server.context import IMDS_PREFIX, AdminError, SandboxContext
from trainctl_sandbox.server.protocol import (
    NOT_HANDLED,
    AwsCall,
    AwsError,
    error_response,
    identify,
    json_response,
    request_body,
    throttle_error,
)

ADMIN_PREFIX = "/_trainctl/admin/"
MOTO_RESET = "/moto-api/reset"

AdminRouter = Callable[[str, dict], dict]
JsonOperation = Callable[[SandboxContext, AwsCall, dict], Any]


def _model_refusal(call: AwsCall, environ: dict) -> tuple[str, str] | None:
    """AWS's error for a request that breaks its botocore model's server-side constraints, else None."""
    headers = {k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")}
    if environ.get("CONTENT_TYPE"):
        headers["content-type"] = environ["CONTENT_TYPE"]
    return strict_requests.check(call.service, call.operation, call.protocol, request_body(environ),
                                 environ.get("QUERY_STRING", ""), environ.get("PATH_INFO", "/"), headers)


def _respond(start_response: Callable, status: int, headers: list[tuple[str, str]], body: bytes) -> Iterable[bytes]:
    start_response(f"{status} {HTTPStatus(status).phrase}", headers)
    return [body]


def _json(start_response: Callable, status: int, payload: dict) -> Iterable[bytes]:
    body = json.dumps(payload, default=str).encode()
    return _respond(start_response, status, [("Content-Type", "application/json"),
                                             ("Content-Length", str(len(body)))], body)


class SandboxApp:
    def __init__(self, ctx: SandboxContext, moto_app: Callable, admin: AdminRouter,
                 json_operations: dict[tuple[str, str], JsonOperation], wait_ready: Callable[[AwsCall], None],
                 paths: dict[str, Callable] | None = None):
        self.ctx = ctx
        self.moto_app = moto_app
        self.admin = admin
        self.json_operations = json_operations   # (service, operation) -> handler; filled as extensions install
        self.wait_ready = wait_ready
        self.paths = {} if paths is None else paths   # path prefix -> handler (the extensions' PATHS), as installed
        self.call_log = CallLog()   # the calls trainctl made (User-Agent trainctl/...): outlives reset
        # S3 decides a conditional write (If-None-Match / If-Match) atomically: of two racing writes one wins
        # (Amazon S3 User Guide, conditional writes); moto checks, then writes, so the sandbox serialises them
        self.conditional_writes = threading.Lock()

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path.startswith(ADMIN_PREFIX):
            return self._admin(environ, start_response, path[len(ADMIN_PREFIX):])
        if path == MOTO_RESET and environ.get("REQUEST_METHOD") == "POST":
            # moto's own reset would leave the sandbox unseeded: make it the sandbox's reset.
            return self._admin(environ, start_response, "reset")
        if path.startswith(IMDS_PREFIX):  # an instance's metadata service (what 169.254.169.254 is on EC2)
            self.wait_ready(None)  # its extension is one of EC2's, installed by the warm-up
            return self.paths[IMDS_PREFIX](self.ctx, environ, start_response)
        call = identify(environ)
        if call is None:
            return self.moto_app(environ, start_response)
        self.call_log.record(environ.get("HTTP_USER_AGENT", ""), call.service, call.operation, call.region)
        try:
            return self._handle(call, environ, start_response)
        finally:
            self.call_log.done(environ.get("HTTP_USER_AGENT", ""))

    def _handle(self, call: AwsCall, environ: dict, start_response: Callable) -> Iterable[bytes]:
        try:
            self.wait_ready(call)
            self._delay(call)
            if self.ctx.faults.take_throttle(call.qualified) or self.ctx.faults.take_throttle(call.operation):
                return _respond(start_response, *error_response(call, *throttle_error(call)))
            refusal = _model_refusal(call, environ)
            if refusal is not None:  # what AWS refuses on the server, whatever moto would accept
                return _respond(start_response, *error_response(call, *refusal, 400))
            s3_refusal = (s3_checks.refusal(call, environ, request_body(environ))
                          or s3_iam.refusal(call, environ, self.ctx.account_id)) if call.service == "s3" else None
            if s3_refusal is not None:  # another account's bucket, a body that is not what its checksum says, or
                # an assumed role whose policies do not allow the request (s3_iam.py)
                return _respond(start_response, *error_response(call, *s3_refusal))
            handler = self.json_operations.get((call.service, call.operation))
            if handler is not None and call.protocol == "json":
                params = json.loads(request_body(environ) or b"{}")
                result = handler(self.ctx, call, params)
                if result is not NOT_HANDLED:
                    return _respond(start_response, *json_response(result))
        except AwsError as e:
            return _respond(start_response, *error_response(call, e.code, e.message, e.status))
        except Exception as e:  # noqa: BLE001 - answer as AWS would (500), and leave the trace in the log
            traceback.print_exc(file=sys.stderr)
            return _respond(start_response, *error_response(call, "InternalFailure", f"sandbox error: {e}", 500))
        if call.service == "s3" and ("HTTP_IF_NONE_MATCH" in environ or "HTTP_IF_MATCH" in environ):
            with self.conditional_writes:
                self._deleted_first(environ)
                return self._moto(call, environ, start_response)
        if call.service == "ec2":  # atomic, as AWS's calls are (backend_lock.py)
            with backend_lock.EC2:
                return self._moto(call, environ, start_response)
        return self._moto(call, environ, start_response)

    def _moto(self, call: AwsCall, environ: dict, start_response: Callable) -> Iterable[bytes]:
        """moto's answer, read whole; a failure inside moto is AWS's 500 InternalError in the call's protocol
        (which botocore retries), never the HTML error page of the HTTP server (which no AWS client can parse)."""
        try:
            return list(self.moto_app(environ, start_response))
        except Exception as e:  # noqa: BLE001 - answer as AWS would, and leave the trace in the log
            traceback.print_exc(file=sys.stderr)
            code = "InternalError" if call.protocol == "ec2" else "InternalFailure"  # each service's own word
            status, headers, body = error_response(call, code, f"sandbox error: {e}", 500)
            start_response(f"{status} {HTTPStatus(status).phrase}", headers, sys.exc_info())
            return [body]

    def _deleted_first(self, environ: dict) -> None:
        """The `delete_before_write` switch: another writer's DeleteObject lands just before this If-Match write."""
        bucket = s3_checks.bucket_name(environ)
        path = unquote(environ.get("PATH_INFO", "/")).lstrip("/")
        key = path.split("/", 1)[1] if path.startswith(f"{bucket}/") else path
        if "HTTP_IF_MATCH" in environ and bucket and self.ctx.faults.take_deleted_before_write(bucket, key):
            from moto.s3.models import s3_backends

            partition, account = s3_backends.bucket_accounts[bucket]
            s3_backends[account][partition].delete_object(bucket, key)

    def _delay(self, call: AwsCall) -> None:
        """Hold the call for the operation's latency, as set now: lowering it (to 0) releases a call already held,
        so a test can hold a call for as long as it needs, then let it go (no race with a fixed delay)."""
        f, start = self.ctx.faults, time.monotonic()
        while True:
            with f.lock:
                ms = sum(f.latency_ms.get(k, 0.0) for k in {call.operation, call.qualified, "*"})
            left = start + ms / 1000.0 - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.05))

    def _admin(self, environ: dict, start_response: Callable, action: str) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST":
            return _json(start_response, 405, {"error": "admin actions are POST requests with a JSON body"})
        try:
            raw = request_body(environ)
            payload = json.loads(raw) if raw.strip() else {}
            if not isinstance(payload, dict):
                raise AdminError("the body must be a JSON object")
            if action == CALL_LOG_ACTION:
                return _json(start_response, 200, self.call_log.admin(payload))
            return _json(start_response, 200, self.admin(action, payload))
        except AdminError as e:
            return _json(start_response, e.status, {"error": str(e), "action": action})
        except ValueError as e:  # a request the action refuses: its message is the answer, as AWS's are
            return _json(start_response, 400, {"error": str(e), "action": action})
        except (KeyError, TypeError) as e:
            return _json(start_response, 400, {"error": f"{type(e).__name__}: {e}", "action": action})
        except Exception as e:  # noqa: BLE001 - an admin failure is reported to the caller, with a trace in the log
            traceback.print_exc(file=sys.stderr)
            return _json(start_response, 500, {"error": f"{type(e).__name__}: {e}", "action": action})
