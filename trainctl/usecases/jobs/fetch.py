"""`trainctl fetch JOB [--what model|tensorboard|logs|checkpoints] [DEST]`: what a job produced, downloaded.

Where each output is, in the job bucket's layout (naming/bucket.py):
- the model: where the backend puts it (`Backend.model_output`); an archive (model.tar.gz) is extracted into DEST;
- TensorBoard events: JOB/tensorboard/; checkpoints: JOB/checkpoints/;
- logs: the job's log lines from CloudWatch Logs, every host in time order, into DEST/JOB.log.
A platform that records a job's S3 paths itself says them (`Backend.output_places`), over the layout's.
"""
from __future__ import annotations

import os
import tarfile
from dataclasses import dataclass

from trainctl.errors import UsageError
from trainctl.naming import bucket as layout

WHAT = ("model", "tensorboard", "logs", "checkpoints")


@dataclass(frozen=True)
class Fetched:
    what: str
    source: str
    dest: str
    files: int
    size: int


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


def _download(s3, uri: str, dest: str, owner: dict) -> tuple[int, int]:
    bucket, prefix = _split(uri) if not uri.endswith(".tar.gz") else uri.removeprefix("s3://").split("/", 1)
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, **owner):
        keys += [(o["Key"], o["Size"]) for o in page.get("Contents", []) if not o["Key"].endswith("/")]
    for key, _ in keys:
        rel = key[len(prefix):].lstrip("/") if not uri.endswith(".tar.gz") else key.rsplit("/", 1)[-1]
        path = os.path.abspath(os.path.join(dest, rel))
        if os.path.commonpath([path, os.path.abspath(dest)]) != os.path.abspath(dest):
            raise UsageError(f"{uri}: the object key {key!r} leads outside {dest}; not downloaded")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        s3.download_file(bucket, key, path, ExtraArgs=owner)
        if path.endswith("model.tar.gz"):  # a platform's archive (SageMaker's): what the job wrote to /opt/ml/model
            with tarfile.open(path) as tar:
                tar.extractall(dest, filter="data")
    return len(keys), sum(size for _, size in keys)


def fetch(ref, what: str, dest: str | None, bucket: str | None = None) -> Fetched:
    from trainctl.aws import clients as aws

    if what not in WHAT:
        raise UsageError(f"--what {what!r}: use one of {', '.join(WHAT)}")
    dest = dest or f"{ref.job_id}-{what}"
    os.makedirs(dest, exist_ok=True)
    if what == "logs":
        return _fetch_logs(ref, dest)
    from trainctl.backends import get_backend

    account = ref.record.account if ref.record else aws.client("sts", ref.region).get_caller_identity()["Account"]
    places = where(ref.job_id, ref.platform, account, ref.region, bucket)
    places.update(get_backend(ref.platform).output_places(ref.job_id, ref.region))
    mine = places[what].startswith(f"s3://{bucket or layout.job_bucket(account, ref.region)}/")
    files, size = _download(aws.client("s3", ref.region), places[what], dest, layout.owner(account if mine else None))
    if not files:
        raise UsageError(f"{ref.job_id}: nothing at {places[what]} yet (the {what} appears there when the job "
                         "writes it; `trainctl watch` says how far it is)")
    return Fetched(what, places[what], dest, files, size)


def _fetch_logs(ref, dest: str) -> Fetched:
    from trainctl.backends import get_backend
    from trainctl.usecases.jobs.watch import read_all

    lines = read_all(get_backend(ref.platform), ref.job_id, ref.region)[2]
    path = os.path.join(dest, f"{ref.job_id}.log")
    with open(path, "w", encoding="utf-8") as f:
        for ln in lines:
            f.write(f"[{ln.host}] {ln.message}\n")
    return Fetched("logs", "CloudWatch Logs", dest, 1, os.path.getsize(path))
