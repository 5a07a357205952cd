"""One relaunch per loss of nodes: a claim in the job bucket that exactly one of the processes that may replace a
job's lost nodes takes before its CreateFleet (a `trainctl watch --recover` on each of two laptops, or the nodes'
own agents). Without it two watchers relaunched one lost node twice (issue 36, item 5): the second one's
ClientToken derived from instance ids the first relaunch had changed, so EC2 did not see a repeat.

The claim is the object `<job>/status/relaunch/<loss>`; `<loss>` names the set of lost instance ids (`claim_key`),
which does not change while a relaunch of it is under way. It is taken with PutObject `If-None-Match: *`: S3 writes
it for exactly one writer; the others get 412 PreconditionFailed (409 ConditionalRequestConflict when the writes
meet) and launch nothing (Amazon S3 User Guide, "How to prevent object overwrites with conditional writes").
A holder that launched nothing (no capacity, an error) releases it, so the next attempt takes it at once; a claim
whose holder died on the way is taken over once it is STALE_S old. Both overwrite with `If-Match` on the ETag read,
so of several takers one wins. A loss relaunched keeps its claim: a later loss is another set, another key.

Standard library only (the caller gives the S3 client): shipped in the node agent (AGENT_MODULES) and used by the
CLI's recovery (backends/ec2/attempts.py), so both sides take the same key the same way.
"""
from __future__ import annotations

import hashlib
import json
import time
from email.utils import parsedate_to_datetime

CLAIM_FOLDER = "status/relaunch"   # under the job's status/ folder: the node role may write there
# A relaunch takes a few CreateFleet calls (every AZ tried, IAM's profile retries): minutes. A claim older than
# this whose holder never released it is one whose holder died: another may take it over.
STALE_S = 15 * 60
LOST_RACE = ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey")


def claim_key(job_id: str, lost_ids) -> str:
    """The claim's key for the loss of exactly these instances (order and repeats do not matter)."""
    digest = hashlib.sha256(json.dumps(sorted(set(lost_ids))).encode()).hexdigest()[:24]
    return f"{job_id}/{CLAIM_FOLDER}/{digest}"


def _code(error: Exception) -> str:
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


class RelaunchClaim:
    """`take(holder)` before the relaunch: None when this caller holds the claim now, else one line naming who
    holds it; `release()` when the relaunch launched nothing."""

    def __init__(self, s3, bucket: str, key: str, expected_owner: str | None = None):
        self.s3, self.bucket, self.key = s3, bucket, key
        self.owner = {"ExpectedBucketOwner": expected_owner} if expected_owner else {}
        self.etag: str | None = None

    def _put(self, holder: str, state: str, **condition: str) -> None:
        body = json.dumps({"holder": holder, "state": state, "at": round(time.time())}).encode()
        answer = self.s3.put_object(Bucket=self.bucket, Key=self.key, Body=body, ContentType="application/json",
                                    **self.owner, **condition)
        self.etag = answer.get("ETag")

    def take(self, holder: str) -> str | None:
        try:
            self._put(holder, "held", IfNoneMatch="*")
            return None
        except Exception as e:  # noqa: BLE001 - only a lost race is answered here
            if _code(e) not in LOST_RACE:
                raise
        try:
            seen = self.s3.get_object(Bucket=self.bucket, Key=self.key, **self.owner)
        except Exception as e:  # noqa: BLE001 - NoSuchKey: gone meanwhile (the bucket emptied by `down`)
            if _code(e) not in LOST_RACE:
                raise
            return f"the relaunch claim {self.key} went away while read"
        state = _state(seen)
        age = _age_s(seen)
        if state.get("state") == "held" and age < STALE_S:
            return f"{state.get('holder', 'another process')} holds it since {age:.0f} s"
        try:
            self._put(holder, "held", IfMatch=seen["ETag"])
            return None
        except Exception as e:  # noqa: BLE001
            if _code(e) not in LOST_RACE:
                raise
            return "another process took it over just now"

    def release(self) -> None:
        """Best effort: a claim left held frees itself after STALE_S."""
        if self.etag is None:
            return
        try:
            self._put("", "released", IfMatch=self.etag)
        except Exception:  # noqa: BLE001
            pass
        self.etag = None


def _state(seen: dict) -> dict:
    try:
        value = json.loads(seen["Body"].read(4096))
        return value if isinstance(value, dict) else {}
    except ValueError:
        return {}


def _age_s(seen: dict) -> float:
    """The claim's age by S3's own clock (its answer's Date less the object's LastModified), so a laptop's clock
    that is off does not make a fresh claim stale; the local clock where the answer has no Date."""
    stamp = seen["LastModified"].timestamp()
    date = (seen.get("ResponseMetadata", {}).get("HTTPHeaders") or {}).get("date")
    try:
        now = parsedate_to_datetime(date).timestamp() if date else time.time()
    except (TypeError, ValueError):
        now = time.time()
    return max(0.0, now - stamp)
