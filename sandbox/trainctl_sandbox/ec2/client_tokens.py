"""EC2 ClientToken idempotency for launches (moto ignores the token).

As on AWS: a retried request with the same token and the same parameters returns the first
request's result and launches nothing; the same token with different parameters fails with
IdempotentParameterMismatch. Tokens are scoped to account, region and operation.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from trainctl_sandbox.server.context import SandboxContext
from trainctl_sandbox.server.protocol import AwsError

# Parameters that do not make two requests different.
_IGNORED = ("ClientToken", "DryRun")


def fingerprint(params: Any) -> str:
    plain = params.original_dict() if hasattr(params, "original_dict") else dict(params)
    return json.dumps({k: v for k, v in plain.items() if k not in _IGNORED}, sort_keys=True, default=str)


def _store(ctx: SandboxContext) -> dict:
    return ctx.state.setdefault(__name__, {"lock": threading.Lock(), "tokens": {}})


def idempotent(ctx: SandboxContext, account: str, region: str, operation: str, token: str | None,
               params: Any, run: Callable[[], Any], replay: Callable[[Any], Any],
               remember: Callable[[Any], Any]) -> Any:
    """Run a launch once per token.

    run() launches and returns its result; remember(result) is what is kept for the token
    (e.g. a reservation id); replay(kept) rebuilds the answer for a repeated request."""
    if not token:
        return run()
    store = _store(ctx)
    key = (account, region, operation, token)
    mark = fingerprint(params)
    # One lock for all tokens: two concurrent retries of one request must not both launch.
    with store["lock"]:
        seen = store["tokens"].get(key)
        if seen is not None:
            if seen[0] != mark:
                raise AwsError("IdempotentParameterMismatch",
                               "The client token you have provided is associated with a request that has "
                               "different parameters. Use a different client token for a different request.")
            return replay(seen[1])
        result = run()
        store["tokens"][key] = (mark, remember(result))
        return result


def reset(ctx: SandboxContext) -> None:
    ctx.state.pop(__name__, None)
