"""CloudWatch Logs of sandbox SageMaker jobs, through moto's in-process backend (the same data the HTTP API
serves), their checkpoints' sync and the archives a job uploads (S3 itself: server/moto_s3.py)."""
from __future__ import annotations

import io
import tarfile
import threading
from pathlib import Path
from typing import Callable

from trainctl_sandbox.server.moto_s3 import MotoS3, parse_s3_uri

LOG_GROUP = "/aws/sagemaker/TrainingJobs"


class MotoLogs:
    """CloudWatch Logs through moto's in-process backend, so FilterLogEvents/GetLogEvents see them."""

    lock = threading.Lock()  # moto's logs backend is not thread-safe; one writer at a time

    def __init__(self, account_id: str, region: str, allowed: Callable[[], bool]):
        from moto.logs.models import logs_backends

        self.backend = logs_backends[account_id][region]
        self.allowed = allowed  # False once the job is forgotten: then nothing is written
        self._last_ts: dict[str, int] = {}

    def create_stream(self, stream: str) -> None:
        with self.lock:
            if not self.allowed():
                return
            if LOG_GROUP not in self.backend.groups:
                self.backend.create_log_group(LOG_GROUP, tags={})
            if stream not in self.backend.groups[LOG_GROUP].streams:
                self.backend.create_log_stream(LOG_GROUP, stream)

    def put(self, stream: str, message: str, when: float) -> None:
        with self.lock:
            if not self.allowed() or LOG_GROUP not in self.backend.groups:
                return
            # one stream's events must not go back in time (stdout and stderr race)
            ts = max(int(when * 1000), self._last_ts.get(stream, 0))
            self._last_ts[stream] = ts
            self.backend.put_log_events(LOG_GROUP, stream, [{"timestamp": ts, "message": message}])


def tar_folders(folders: list[Path]) -> bytes:
    """One tar.gz of several folders' contents; on a name clash the first folder wins."""
    buf = io.BytesIO()
    seen: set[str] = set()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for folder in folders:
            if not folder.is_dir():
                continue
            for path in sorted(folder.rglob("*")):
                rel = path.relative_to(folder).as_posix()
                if rel in seen or not (path.is_file() or path.is_dir()):
                    continue
                seen.add(rel)
                tar.add(path, arcname=rel, recursive=False)
    return buf.getvalue()


def write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


class CheckpointSync:
    """CheckpointConfig.S3Uri and the hosts' checkpoint folders: restored before an attempt, new or
    changed files uploaded while it runs and after it ends (as SageMaker syncs /opt/ml/checkpoints)."""

    def __init__(self, s3: MotoS3, uri: str | None):
        self.s3 = s3
        self.uri = uri
        self._synced: dict[tuple[int, str], tuple[int, int]] = {}  # (host, file) -> (size, mtime) uploaded

    def _location(self) -> tuple[str, str]:
        bucket, prefix = parse_s3_uri(self.uri or "")
        return bucket, prefix.rstrip("/") + "/" if prefix.strip("/") else ""

    def objects(self) -> list[tuple[str, bytes]]:
        """The checkpoint files to restore, as (relative path, bytes)."""
        if not self.uri:
            return []
        bucket, prefix = self._location()
        try:
            keys = self.s3.keys(bucket, prefix)
        except Exception:  # no bucket yet: nothing to restore (the first upload will say so)
            return []
        return [(k[len(prefix):], self.s3.get(bucket, k)) for k in keys if k[len(prefix):]]

    def mark_synced(self, host_index: int, folder: Path, rels: list[str]) -> None:
        """Restored files count as already synced: only new or changed ones go back up."""
        for rel in rels:
            st = (folder / rel).stat()
            self._synced[(host_index, rel)] = (st.st_size, st.st_mtime_ns)

    def sync(self, folders: list[tuple[int, Path]]) -> None:
        """Upload new or changed files of every (host index, checkpoint folder)."""
        if not self.uri:
            return
        bucket, prefix = self._location()
        for index, folder in folders:
            if not folder.is_dir():
                continue
            for path in sorted(folder.rglob("*")):
                try:
                    st = path.stat()
                    if not path.is_file():
                        continue
                    rel = path.relative_to(folder).as_posix()
                    sig = (st.st_size, st.st_mtime_ns)
                    if self._synced.get((index, rel)) == sig:
                        continue
                    data = path.read_bytes()
                except FileNotFoundError:  # a temp file renamed away while we looked
                    continue
                self.s3.put(bucket, prefix + rel, data)
                self._synced[(index, rel)] = sig


def upload_artifacts(s3: MotoS3, output_path: str, job_name: str, models: list[Path], outputs: list[Path]) -> None:
    """model.tar.gz (and output.tar.gz when a host wrote output data) under S3OutputPath/JOB/output/."""
    bucket, prefix = parse_s3_uri(output_path)
    prefix = (prefix.rstrip("/") + "/" if prefix.strip("/") else "") + f"{job_name}/output/"
    s3.put(bucket, prefix + "model.tar.gz", tar_folders(models))
    if any(folder.is_dir() and any(folder.iterdir()) for folder in outputs):
        s3.put(bucket, prefix + "output.tar.gz", tar_folders(outputs))
