"""Two identical jobs by accident are money burnt: before a launch, the jobs of the same spec (by its name) that
this endpoint's store records and that AWS still says are running."""
from __future__ import annotations

from trainctl.state.job_store import JobStore

# Recorded outcomes after which a job holds no instances: AWS need not be asked about it again. A launch whose
# job-starting call went out records "Unknown" instead (launch.py), which is asked about like a running job.
ENDED = ("Completed", "Failed", "Stopped", "SubmitFailed", "NoCapacity", "Interrupted", "CleanupFailed")
# How far back the store is read: a spec's running jobs are among its newest.
RECENT = 200


def running_jobs_of(store: JobStore, spec_name: str) -> list[tuple[str, str]]:
    """(job id, live status) of each job of `spec_name` that is still running. A job AWS says it does not know
    (or reports ended) is not counted: the check must not block a launch over a record that is out of date. A
    job AWS could not be asked about is counted as "unknown": it may run."""
    from trainctl.aws.clients import error_summary
    from trainctl.backends import get_backend
    from trainctl.errors import TrainctlError

    running = []
    for job in store.jobs(RECENT):
        if job.spec_name != spec_name or job.status in ENDED:
            continue
        try:
            view = get_backend(job.platform).describe(job.job_id, job.region)
        except TrainctlError:  # AWS answered that it has no such job (deleted, never created): not running
            continue
        except Exception as e:  # noqa: BLE001 - no answer: it may run
            running.append((job.job_id, f"unknown: AWS could not be asked ({error_summary(e)})"))
            continue
        if view.finished:
            store.set_status(job.job_id, view.status)
            continue
        running.append((job.job_id, "/".join(s for s in (view.status, view.secondary_status) if s)))
    return running


def duplicate_question(running: list[tuple[str, str]], spec_name: str) -> str:
    jobs = ", ".join(f"{job} ({status})" for job, status in running)
    return f"an earlier job of spec {spec_name} still runs: {jobs}"


# ---------------------------------------------------------------------- the launch marker on AWS
# One object per spec in the job bucket naming the newest launch of it. Launches from different machines (no
# shared job store) race for it with S3's conditional writes: PutObject with If-None-Match: * succeeds only
# when no object has the key, and with If-Match: ETAG only when the object is still the one read; otherwise
# 412 PreconditionFailed (409 ConditionalRequestConflict when two such writes meet). Source: Amazon S3 User
# Guide, "How to prevent object overwrites with conditional writes", and the PutObject API reference.
MARKER_PREFIX = "trainctl/launches/"
# A marker whose job AWS does not know yet is a launch still on its way (planning, role, code upload) for this
# long; an older one is a launch that never reached AWS, and is taken over.
LAUNCHING_S = 30 * 60
LOST_RACE = ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey")


def marker_key(spec_name: str) -> str:
    return f"{MARKER_PREFIX}{spec_name}"


class LaunchMarker:
    """The spec's launch marker as this launch holds it (`claim`), and its release when the launch started
    nothing (`release`: the marker then says so, and the next launch takes it over at once)."""

    def __init__(self, spec_name: str, job_id: str, platform: str, account: str, region: str):
        from trainctl.naming import bucket as layout

        self.job_id, self.platform, self.account, self.region = job_id, platform, account, region
        self.bucket, self.key, self.owner = layout.job_bucket(account, region), marker_key(spec_name), \
            layout.owner(account)
        self.etag: str | None = None

    def _put(self, ended: str = "", **condition: str) -> None:
        from trainctl.aws import clients as aws

        meta = {"job": self.job_id, "platform": self.platform, **({"ended": ended} if ended else {})}
        answer = aws.client("s3", self.region).put_object(Bucket=self.bucket, Key=self.key, Body=self.job_id.encode(),
                                                          Metadata=meta, **self.owner, **condition)
        self.etag = answer.get("ETag")

    def claim(self, now: float) -> list[tuple[str, str]]:
        """Make the marker name this job, unless it names a job that still runs or is being launched: then
        (that job, its status). Nothing to claim where the bucket does not exist yet (the first launch in this
        account and region) or the account is not known."""
        from trainctl.aws import clients as aws

        if not self.account:
            return []
        try:
            self._put(IfNoneMatch="*")
            return []
        except Exception as e:  # noqa: BLE001
            if aws.error_code(e) == "NoSuchBucket":
                return []
            if aws.error_code(e) not in LOST_RACE:
                raise
        head = aws.client("s3", self.region).head_object(Bucket=self.bucket, Key=self.key, **self.owner)
        holder = _holder_status(head, self.region, now)
        if holder is not None:
            return [holder]
        try:
            self._put(IfMatch=head["ETag"])  # its job has ended: take it over, unless another launch just did
        except Exception as e:  # noqa: BLE001
            if aws.error_code(e) not in LOST_RACE:
                raise
            return [("another launch", f"took the launch marker s3://{self.bucket}/{self.key} just now")]
        return []

    def hand_over(self, job_id: str) -> list[tuple[str, str]]:
        """The next attempt of the same launch (--failover) takes the marker this one holds."""
        from trainctl.aws import clients as aws

        previous, self.job_id = self.job_id, job_id
        try:
            self._put(IfMatch=self.etag or "")
        except Exception as e:  # noqa: BLE001
            if aws.error_code(e) not in LOST_RACE:
                raise
            return [("another launch", f"took the launch marker from {previous} just now")]
        return []

    def release(self, why: str) -> None:
        """The launch started nothing: say so in the marker, if it is still this launch's (best effort)."""
        if self.etag is None:
            return
        try:
            self._put(ended=why, IfMatch=self.etag)
        except Exception:  # noqa: BLE001 - a marker left naming this job frees itself after LAUNCHING_S
            pass


def _holder_status(head: dict, region: str, now: float) -> tuple[str, str] | None:
    """(job, status) when the marker's job runs or is being launched; None when it has ended or is stale."""
    from trainctl.aws.clients import error_summary
    from trainctl.backends import get_backend, platforms
    from trainctl.errors import TrainctlError

    meta = head.get("Metadata") or {}
    holder, age = meta.get("job", "?"), now - head["LastModified"].timestamp()
    if meta.get("ended"):
        return None
    launching = (holder, f"being launched elsewhere (marked {age:.0f} s ago)") if age < LAUNCHING_S else None
    try:
        view = get_backend(meta.get("platform") or platforms()[0]).describe(holder, region)  # (no platform:
        # a marker written before markers named it, when the registry's first was the only platform)
    except TrainctlError:  # AWS does not know it (yet)
        return launching
    except Exception as e:  # noqa: BLE001 - no answer: it may run
        return holder, f"unknown: AWS could not be asked ({error_summary(e)})"
    if view.finished:  # an EC2 job whose fleet is not made yet reads as finished without ever starting
        return launching if view.started_at is None else None
    return holder, "/".join(s for s in (view.status, view.secondary_status) if s)
