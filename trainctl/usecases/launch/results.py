"""What a launch gives back, shared by the launch and the Capacity Block path that records a job waiting for its
block: the job id a launch makes, its attempts and result (`launch -o json`), the account it is recorded in."""
from __future__ import annotations

import secrets
import time

from pydantic import BaseModel

from trainctl.plans import Option


def new_job_id(spec_name: str) -> str:
    # SageMaker job names: <= 63 chars of [a-zA-Z0-9-]; leave room for a failover suffix (-f9).
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return f"{spec_name[:36].strip('-')}-{stamp}-{secrets.token_hex(2)}"


class Attempt(BaseModel):
    """One option tried by a launch, and what came of it."""

    job_id: str
    rank: int
    layout: str
    region: str
    outcome: str                  # submitted | running | no capacity: <why>


class LaunchResult(BaseModel):
    """What `trainctl launch -o json` prints: the job that runs, its option, and every attempt before it."""

    job_id: str
    platform: str
    region: str
    option: Option
    attempts: list[Attempt]


def account(region: str) -> str:
    """The account the job is launched in, recorded with it ('' when AWS does not say)."""
    from trainctl.aws import clients as aws

    try:
        return aws.client("sts", region).get_caller_identity()["Account"]
    except Exception:  # noqa: BLE001 - the record is still useful without it; submit reports real problems
        return ""
