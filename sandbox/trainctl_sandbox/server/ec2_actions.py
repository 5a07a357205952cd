"""Adding actions to moto's EC2 API, and wrapping the ones it has, in one place.

These are process-global patches of moto's `EC2Response` class (one sandbox server per process).
Patching the response class, rather than answering in WSGI middleware, keeps moto's request
parsing (botocore's model turns `InstanceTypes.1=...` into lists) and moto's serializer (which
writes AWS's XML from the model, so boto3 parses it) for free, and lets an extension reach the
same backend objects that moto's own actions use.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from moto.core.responses import ActionResult
from moto.core.utils import camelcase_to_underscores
from moto.ec2.responses import EC2Response

from trainctl_sandbox.server.context import SandboxContext
from trainctl_sandbox.server.protocol import AwsCall, AwsError, error_response

# moto's own implementation of each wrapped action, kept so that wrapping twice (a second
# install in the same process) wraps the original rather than the previous wrapper.
_ORIGINALS: dict[str, Callable[[EC2Response], Any]] = {}

Handler = Callable[[SandboxContext, EC2Response], Any]
Wrapper = Callable[[SandboxContext, EC2Response, Callable[[], Any]], Any]


def _answer(response: EC2Response, result: Any) -> Any:
    return result if isinstance(result, (ActionResult, tuple, str)) else ActionResult(result)


def _error(response: EC2Response, err: AwsError) -> tuple[str, dict]:
    """EC2's error XML with the error's own HTTP status (moto's serializer would always say 400,
    but AWS sends e.g. InsufficientInstanceCapacity as a 500, which botocore treats differently)."""
    status, headers, body = error_response(AwsCall("ec2", response.region, "", "ec2"), err.code, err.message,
                                           err.status)
    out = {k: v for k, v in headers if k != "Content-Length"}
    out["status"] = status
    return body.decode(), out


def define(action: str, ctx: SandboxContext, handler: Handler) -> None:
    """Answer EC2 `action` with `handler(ctx, response)`: a dict shaped like the action's output."""

    def method(self: EC2Response) -> Any:
        try:
            return _answer(self, handler(ctx, self))
        except AwsError as e:
            return _error(self, e)

    method.__name__ = camelcase_to_underscores(action)
    setattr(EC2Response, method.__name__, method)


def wrap(action: str, ctx: SandboxContext, wrapper: Wrapper) -> None:
    """Answer EC2 `action` with `wrapper(ctx, response, call_moto)`; call_moto() runs moto's own action."""
    name = camelcase_to_underscores(action)
    original = _ORIGINALS.setdefault(name, getattr(EC2Response, name))

    def method(self: EC2Response) -> Any:
        try:
            return _answer(self, wrapper(ctx, self, lambda: original(self)))
        except AwsError as e:
            return _error(self, e)

    method.__name__ = name
    setattr(EC2Response, name, method)
