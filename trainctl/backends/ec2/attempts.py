"""ClientTokens of recovery fleets: unique per attempt, shared by concurrent `watch --recover` processes.

EC2 answers a CreateFleet that repeats a ClientToken with the first request's result, without acting again
(EC2 API reference, "Ensuring idempotency"). A token made only from the job's instances is the same after a
fleet refused for capacity (it made no instance), so every later attempt would get that refusal replayed.

Here the token also holds the attempt's number: the count of refusals recorded so far for the same lost set
under s3://<bucket>/<job>/recovery/<lost set>/. A refusal is recorded once it is final (what the fleet got
was given back), so the next attempt sends a new token. Two processes that recover the same loss at the same
time read the same count, send the same token with the same parameters, and EC2 makes one fleet: the second
gets the first one's answer. Both then record the same refusal key, so neither skips a number.
"""
from __future__ import annotations

import hashlib
import json
from typing import Callable

from trainctl.naming.bucket import owner
from trainctl.backends.ec2.common import bucket_of, instances, job_config
from trainctl.backends.ec2.prepare import token
from trainctl.bootstrap.relaunch_claim import RelaunchClaim, claim_key


def recovery_prefix(job_id: str, lost_set: str) -> str:
    return f"{job_id}/recovery/{lost_set}/"


def watcher() -> str:
    """Who holds a relaunch claim this process takes, as the other claimants are told."""
    import os
    import socket

    return f"`watch --recover` on {socket.gethostname()} (pid {os.getpid()})"


class RecoveryAttempts:
    def __init__(self, client_for, ec2, job_id: str, region: str):
        self.ec2, self.job_id = ec2, job_id
        self.s3 = client_for("s3", region)
        self.bucket, self.account = bucket_of(client_for, region, job_config(ec2, job_id))
        self.owner = owner(self.account)  # every S3 call names the bucket's owner

    def claim(self, lost_ids: list[str]) -> tuple[RelaunchClaim | None, str]:
        """(the relaunch claim of this loss, held by this process; or None and who holds it): exactly one of the
        processes that saw the same loss relaunches it (bootstrap/relaunch_claim.py)."""
        claim = RelaunchClaim(self.s3, self.bucket, claim_key(self.job_id, lost_ids), self.account or None)
        holder = claim.take(watcher())
        return (None, holder) if holder else (claim, "")

    def next(self, what: str) -> tuple[str, Callable[[], None]]:
        """(the ClientToken of this attempt, a function that records its refusal)."""
        ids = sorted(i["InstanceId"] for i in instances(self.ec2, self.job_id))
        lost_set = hashlib.sha256(json.dumps([what, ids]).encode()).hexdigest()[:16]
        prefix = recovery_prefix(self.job_id, lost_set)
        n = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=prefix, **self.owner).get("KeyCount", 0)
        client_token = token(self.job_id, what, {"what": what, "instances": ids, "attempt": n})

        def refused() -> None:
            self.s3.put_object(Bucket=self.bucket, Key=f"{prefix}{n:06d}", Body=client_token.encode(), **self.owner)
        return client_token, refused
