"""`trainctl fetch JOB [--what model|tensorboard|logs|checkpoints] [DEST]`: what a job produced, downloaded.

Where each output is, in the job bucket's layout (naming/bucket.py):
- the model: where the backend puts it (`Backend.model_output`); an archive (model.tar.gz) is extracted into DEST;
- TensorBoard events: JOB/tensorboard/; checkpoints: JOB/checkpoints/;
- logs: the job's log lines from CloudWatch Logs, every host in time order, into DEST/JOB.log.
A SageMaker job's own DescribeTrainingJob names its S3 paths; an EC2 job's are in its job bucket.

What a job wrote is hostile input: only SageMaker's own archive (the key S3ModelArtifacts names) is extracted, by
fetch_files' own rules (no links, no path through a link, sizes capped and checked against free space first),
into a folder fetch creates empty; every other object is downloaded as one file.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

from trainctl.errors import UsageError
from trainctl.naming import bucket as layout
from trainctl.usecases.jobs import fetch_files as files

WHAT = ("model", "tensorboard", "logs", "checkpoints")
DEFAULT_MAX_GIB = 100.0  # what one fetch writes at most, unless --max-gib says otherwise


@dataclass(frozen=True)
class Fetched:
    what: str
    source: str
    dest: str
    files: int
    size: int  # bytes written (the archive's files, not the archive)
    skipped: tuple[str, ...] = ()  # "NAME: why" of each object or member not written


def _split(uri: str) -> tuple[str, str]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return bucket, prefix.rstrip("/") + "/" if prefix.strip("/") else ""


def where(job_id: str, platform: str, account: str, region: str, bucket: str | None = None) -> dict[str, str]:
    """S3 URI of each output in the job bucket layout (what `watch` names at the end)."""
    from trainctl.backends import backend_class

    b = bucket or layout.job_bucket(account, region)
    return {"model": backend_class(platform).model_output(b, job_id), "tensorboard": f"s3://{b}/{layout.tensorboard_prefix(job_id)}",
            "checkpoints": f"s3://{b}/{layout.checkpoints_prefix(job_id)}"}


def where_line(job_id: str, platform: str, account: str, region: str) -> str:
    places = where(job_id, platform, account, region)
    return (f"outputs: model {places['model']}, TensorBoard {places['tensorboard']}, checkpoints "
            f"{places['checkpoints']} (trainctl fetch {job_id} --what model|tensorboard|logs|checkpoints)")


def _listing(s3, bucket: str, prefix: str, owner: dict) -> list[tuple[str, int, str]]:
    found = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, **owner):
        found += [(o["Key"], o["Size"], o.get("ETag", "")) for o in page.get("Contents", [])]
        if len(found) > files.MAX_MEMBERS:
            raise UsageError(f"s3://{bucket}/{prefix}: more than {files.MAX_MEMBERS} objects; nothing written")
    return sorted(found)


def _get(s3, bucket: str, key: str, etag: str, out, owner: dict, size: int) -> None:
    """The object as listed: If-Match its ETag (an object the job replaced meanwhile is not the one counted), and
    never more than its listed size."""
    body = s3.get_object(Bucket=bucket, Key=key, **owner, **({"IfMatch": etag} if etag else {}))["Body"]
    got = 0
    while chunk := body.read(1 << 20):
        got += len(chunk)
        if got > size:
            raise OSError(f"longer than the {size} bytes listed")
        out.write(chunk)


def _download(s3, uri: str, dest: str, owner: dict, cap: int) -> files.Written:
    """Each object under the prefix as a file under dest, its key's rest the file's path (fetch_files' rules)."""
    from botocore.exceptions import ClientError

    bucket, prefix = _split(uri)
    written, plan, take = files.Written(), files.Plan(), []
    for key, size, etag in _listing(s3, bucket, prefix, owner):
        if key.endswith("/") and size == 0:  # a folder marker (the console's "Create folder")
            continue
        parts = files.parts_of(key[len(prefix):])
        why = parts if isinstance(parts, str) else plan.add(parts, False)
        if why is None:
            take.append((key, size, etag, parts))
        else:
            written.skipped.append(f"{files.shown(key)}: {why}")
    files.check_room(sum(t[1] for t in take), dest, cap, uri)
    for key, size, etag, parts in take:
        try:
            with files.create(dest, parts) as out:
                try:
                    _get(s3, bucket, key, etag, out, owner, size)
                except BaseException:
                    files.discard(dest, parts)  # refused, changed or cut short: no empty or partial file stays
                    raise
                out.flush()
                written.size += os.fstat(out.fileno()).st_size
            written.files += 1
        except OSError as e:
            written.skipped.append(f"{files.shown(key)}: not written ({e.strerror or e})")
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") not in ("PreconditionFailed", "412"):
                raise
            written.skipped.append(f"{files.shown(key)}: changed while it was fetched; fetch again")
    return written


def _archive(s3, uri: str, dest: str, owner: dict, cap: int) -> files.Written:
    """SageMaker's model.tar.gz (the one key S3ModelArtifacts names), extracted into dest; the archive itself is
    kept beside dest only while it is read."""
    bucket, key = uri.removeprefix("s3://").split("/", 1)
    listed = [t for t in _listing(s3, bucket, key, owner) if t[0] == key]
    if not listed:
        return files.Written()
    _, size, etag = listed[0]
    parent = os.path.dirname(dest)
    files.check_room(size, parent, cap, uri)
    fd, path = tempfile.mkstemp(prefix=".trainctl-fetch-", suffix=".tar.gz", dir=parent)
    try:
        with os.fdopen(fd, "wb") as out:
            _get(s3, bucket, key, etag, out, owner, size)
        return files.extract(path, dest, cap)
    finally:
        os.unlink(path)


def fetch(ref, what: str, dest: str | None, bucket: str | None = None, max_gib: float = DEFAULT_MAX_GIB) -> Fetched:
    from trainctl.aws import clients as aws

    if what not in WHAT:
        raise UsageError(f"--what {what!r}: use one of {', '.join(WHAT)}")
    if not max_gib > 0:
        raise UsageError(f"--max-gib {max_gib}: give a positive number of GiB")
    cap = int(max_gib * 2**30)
    dest = files.make_dest(dest or f"{ref.job_id}-{what}")
    try:
        return _fetch(ref, what, dest, bucket, cap)
    except BaseException:
        if not os.listdir(dest):  # a failed fetch leaves no empty folder behind
            os.rmdir(dest)
        raise


def _fetch(ref, what: str, dest: str, bucket: str | None, cap: int) -> Fetched:
    from trainctl.aws import clients as aws

    if what == "logs":
        return _fetch_logs(ref, dest)
    from trainctl.backends import get_backend
    from trainctl.backends.features import ArchivesModel

    account = ref.record.account if ref.record else aws.client("sts", ref.region).get_caller_identity()["Account"]
    places = where(ref.job_id, ref.platform, account, ref.region, bucket)
    places.update(get_backend(ref.platform).output_places(ref.job_id, ref.region))
    mine = places[what].startswith(f"s3://{bucket or layout.job_bucket(account, ref.region)}/")
    s3, owner = aws.client("s3", ref.region), layout.owner(account if mine else None)
    if what == "model" and isinstance(get_backend(ref.platform), ArchivesModel):
        got = _archive(s3, places[what], dest, owner, cap)
    else:
        got = _download(s3, places[what], dest, owner, cap)
    if not got.files and not got.skipped:
        raise UsageError(f"{ref.job_id}: nothing at {places[what]} yet (the {what} appears there when the job "
                         "writes it; `trainctl watch` says how far it is)")
    return Fetched(what, places[what], dest, got.files, got.size, tuple(got.skipped))


def _fetch_logs(ref, dest: str) -> Fetched:
    from trainctl.backends import get_backend
    from trainctl.usecases.jobs.watch import read_all

    lines = read_all(get_backend(ref.platform), ref.job_id, ref.region)[2]
    path = os.path.join(dest, f"{ref.job_id}.log")
    with open(path, "w", encoding="utf-8") as f:
        for ln in lines:
            f.write(f"[{ln.host}] {ln.message}\n")
    return Fetched("logs", "CloudWatch Logs", dest, 1, os.path.getsize(path))
