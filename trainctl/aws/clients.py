"""The one place that makes boto3 sessions and clients.

Profile and region come from the CLI's global flags (or the usual AWS environment); the endpoint
from AWS_ENDPOINT_URL (boto3 honours it natively, which is how the sandbox is reached); retries are
bounded with backoff (standard mode) so throttling is absorbed but a dead endpoint is not retried forever.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from trainctl import __version__

DEFAULT_REGION = "us-east-1"
# Pricing's API lives in a few regions only; us-east-1 answers for every region's prices.
PRICING_REGION = "us-east-1"


@dataclass
class AwsSettings:
    profile: str | None = None
    region: str | None = None
    max_attempts: int = int(os.environ.get("TRAINCTL_AWS_MAX_ATTEMPTS", "5"))
    retry_mode: str = os.environ.get("TRAINCTL_AWS_RETRY_MODE", "standard")


SETTINGS = AwsSettings()
# Re-entrant: client() creates the session under the same lock.
_lock = threading.RLock()
_session = None
_clients: dict[tuple, object] = {}


def session():
    """A boto3 Session for the chosen profile (created once; sessions are not thread-safe, clients are)."""
    global _session
    import boto3
    import botocore.exceptions

    from trainctl.errors import UsageError

    with _lock:
        if _session is None:
            try:
                _session = boto3.session.Session(profile_name=SETTINGS.profile, region_name=SETTINGS.region)
            except botocore.exceptions.ProfileNotFound as e:
                raise UsageError(f"AWS profile {SETTINGS.profile!r} not found in ~/.aws/config or credentials; "
                                 "run `aws configure --profile NAME` or drop --profile") from e
        return _session


def reset_session() -> None:
    """Forget the session and its clients (after the environment or the settings changed)."""
    global _session
    with _lock:
        _session = None
        _clients.clear()


def default_region() -> str:
    return SETTINGS.region or session().region_name or DEFAULT_REGION


def has_credentials() -> bool:
    return session().get_credentials() is not None


def endpoint_url() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL") or None


def client(service: str, region: str | None = None, *, max_attempts: int | None = None,
           read_timeout: float | None = None):
    """A boto3 client, one per (service, region, attempts, read timeout): clients are thread-safe, and making one
    costs ~50 ms. `read_timeout` (default 60 s): a listing that must not wait on one slow answer asks for less."""
    from botocore.config import Config

    region = region or SETTINGS.region or DEFAULT_REGION
    attempts = max_attempts or SETTINGS.max_attempts
    key = (service, region, attempts, SETTINGS.retry_mode, read_timeout)
    with _lock:  # client creation touches the session's shared loaders, which are not thread-safe
        if key not in _clients:
            # total_max_attempts counts the first try (botocore's "max_attempts" counts only retries, so
            # TRAINCTL_AWS_MAX_ATTEMPTS=3 used to make 4 attempts)
            config = Config(retries={"total_max_attempts": attempts, "mode": SETTINGS.retry_mode},
                            user_agent_extra=f"trainctl/{__version__}", connect_timeout=5, read_timeout=read_timeout or 60,
                            max_pool_connections=32)
            _clients[key] = session().client(service, region_name=region, config=config)
        return _clients[key]


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore ClientError, or the exception's class name."""
    resp = getattr(exc, "response", None)
    if isinstance(resp, dict):
        return resp.get("Error", {}).get("Code") or exc.__class__.__name__
    return exc.__class__.__name__


# botocore's exceptions when nothing listens at the endpoint (by name: this module imports no botocore at load)
_UNREACHABLE = ("EndpointConnectionError", "ConnectTimeoutError", "ConnectionClosedError")


def unreachable_endpoint(exc: BaseException) -> str | None:
    """One line saying that the endpoint the environment names does not answer, and how to bring it back; None
    for any other error (AWS's own endpoints answer: a connection error there is the network's)."""
    url = endpoint_url()
    if url is None or type(exc).__name__ not in _UNREACHABLE:
        return None
    if os.environ.get("TRAINCTL_SANDBOX"):
        return f"the sandbox at {url} is not running: `trainctl sandbox up`"
    return f"nothing answers at {url} (AWS_ENDPOINT_URL): start that endpoint, or unset AWS_ENDPOINT_URL to use AWS"


def error_summary(exc: BaseException) -> str:
    if (down := unreachable_endpoint(exc)) is not None:
        return down
    resp = getattr(exc, "response", None)
    if isinstance(resp, dict):
        err = resp.get("Error", {})
        msg = (err.get("Message") or "").splitlines()[0] if err.get("Message") else ""
        return f"{err.get('Code', exc.__class__.__name__)}" + (f": {msg[:160]}" if msg else "")
    return f"{exc.__class__.__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
