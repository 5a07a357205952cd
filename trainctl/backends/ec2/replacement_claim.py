"""`watch --recover` takes the same claim as the survivors' agents (bootstrap/replacement.py) before it relaunches
a lost node: S3's conditional write (If-None-Match: *) of <job>/status/replace-<k>-<t>, so a manual "now" and
the nodes' own replacement never launch twice for one loss; and it records what it launched the same way
(status/replaced-<k>), so `watch` and `ls` count every replacement whoever made it."""
from __future__ import annotations

import json
import time

from trainctl.aws import clients as aws
from trainctl.backends.ec2.common import bucket_of
from trainctl.bootstrap.replacement import Ledger
from trainctl.naming import bucket as layout

TAKEN = ("PreconditionFailed", "ConditionalRequestConflict")


def claim(client_for, job_id: str, region: str, config: dict, who: str = "trainctl watch --recover") -> tuple | None:
    """(k, t) of the try this caller now holds, or None when another holds one (or the job has no bucket)."""
    bucket, account = bucket_of(client_for, region, config)
    if not bucket:
        return None
    s3 = client_for("s3", region)
    listing = s3.list_objects_v2(Bucket=bucket, Prefix=layout.status_prefix(job_id), **layout.owner(account))
    ledger = Ledger(listing.get("Contents", []), time.time())
    if ledger.open_claim:
        return None
    k, t = ledger.k, ledger.tries + 1
    try:
        s3.put_object(Bucket=bucket, Key=layout.status_key(job_id, f"replace-{k}-{t}"), IfNoneMatch="*",
                      Body=json.dumps({"by": who, "at": round(time.time())}).encode(), **layout.owner(account))
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) in TAKEN:
            return None
        raise
    return k, t


def settle(client_for, job_id: str, region: str, config: dict, held: tuple, got: list[str] | None, market: str,
           az: str | None, who: str = "trainctl watch --recover") -> None:
    """Record the try's outcome: replaced-<k>, or refused-<k>-<t>-<now> (the next try may go at once)."""
    bucket, account = bucket_of(client_for, region, config)
    k, t = held
    if got:
        name, body = f"replaced-{k}", {"instance_ids": got, "market": market, "availability_zone": az, "tries": t,
                                       "at": round(time.time()), "by": who}
    else:
        name, body = f"refused-{k}-{t}-{int(time.time())}", {"by": who}
    client_for("s3", region).put_object(Bucket=bucket, Key=layout.status_key(job_id, name),
                                        Body=json.dumps(body).encode(), **layout.owner(account))


class Settler:
    """The outcome of a held try, recorded once it is known (`settler(got, market, az)`); `abandon()` when the
    caller stops before that (Ctrl-C of `watch --recover`): the try is recorded as refused, so the next one goes
    at once instead of waiting CLAIM_TTL_S for a claim nobody will settle. Best effort: S3 unreachable then, the
    claim frees itself after CLAIM_TTL_S as before."""

    def __init__(self, client_for, job_id: str, region: str, config: dict, held: tuple):
        self.args, self.held, self.done = (client_for, job_id, region, config), held, False

    def __call__(self, got: list[str] | None, market: str, az: str | None) -> None:
        settle(*self.args, self.held, got, market, az)
        self.done = True

    def abandon(self) -> None:
        if self.done:
            return
        try:
            settle(*self.args, self.held, None, "", None, who="trainctl watch --recover (interrupted)")
        except Exception:  # noqa: BLE001 - the claim's time-to-live still frees it
            pass
        self.done = True
