"""The node agent's checkpoint exchange with S3: the whole checkpoint folder (/opt/ml/checkpoints, as SageMaker's
CheckpointConfig.LocalPath), any names and sub-folders, mirrored to s3://<bucket>/<job>/checkpoints/ and back.

The rule a script follows (docs/your-script.md), as SageMaker's developer guide advises: write a checkpoint under
a temporary name, then rename it into place. The agent never uploads
- a file whose name marks it as being written (TEMP_SUFFIXES: `x.tmp`, `x.part`, ...), nor
- while the training runs, a file whose size and modification time changed since the last look, unless it has
  not changed for SETTLE_S seconds (a file written in place is taken only once it is still).
When the training has exited (`final`), every file but the temporary ones is taken.

Incremental: a file is uploaded when its (size, mtime) differs from what this agent last uploaded or restored;
a file this agent uploaded or restored that the script has since deleted is deleted in S3 too, so a script that
keeps its last K checkpoints keeps the bucket at K. A folder's `manifest.json` (the bundled sharded checkpoints
write it last) goes up only after every other file of its folder, and is deleted first: an optimization for
trainctl's own entrypoints, never a requirement of a script.

Restore, before each start: every object under the prefix that this node lacks (or holds with another size),
downloaded beside and renamed into place, so the script never sees a half-written file.
"""
from __future__ import annotations

import os
import threading
import time

TEMP_SUFFIXES = (".tmp", ".temp", ".part", ".partial", ".download", ".swp", "~")
SETTLE_S = 2.0
MANIFEST = "manifest.json"


def being_written(rel: str) -> bool:
    return os.path.basename(rel).endswith(TEMP_SUFFIXES)


class CheckpointSync:
    def __init__(self, s3, bucket: str, prefix: str, local_dir: str, say, owner: dict | None = None,
                 settle_s: float = SETTLE_S):
        self.s3, self.bucket, self.prefix = s3, bucket, prefix.rstrip("/") + "/"
        self.dir, self.say, self.settle_s = local_dir, say, settle_s
        self.owner = owner or {}  # {"ExpectedBucketOwner": account}: a bucket of another account is refused
        self.synced: dict[str, tuple[int, int]] = {}   # rel path -> (size, mtime_ns) as in S3 now
        self.seen: dict[str, tuple[int, int]] = {}     # rel path -> (size, mtime_ns) at the previous look
        self.lock = threading.Lock()

    # ------------------------------------------------------------ what exists
    def remote(self) -> dict[str, int]:
        """rel path -> size of every object under the prefix."""
        out: dict[str, int] = {}
        kwargs = {"Bucket": self.bucket, "Prefix": self.prefix, **self.owner}
        while True:
            page = self.s3.list_objects_v2(**kwargs)
            for obj in page.get("Contents", []):
                rel = obj["Key"][len(self.prefix):]
                if rel and not rel.endswith("/"):
                    out[rel] = obj["Size"]
            if not page.get("IsTruncated"):
                return out
            kwargs["ContinuationToken"] = page["NextContinuationToken"]

    def local(self) -> dict[str, tuple[int, int]]:
        """rel path -> (size, mtime_ns) of every regular file under the folder (links are not followed)."""
        out: dict[str, tuple[int, int]] = {}
        for top, dirs, files in os.walk(self.dir):
            dirs.sort()
            for name in files:
                path = os.path.join(top, name)
                try:
                    st = os.lstat(path)
                except FileNotFoundError:  # renamed away meanwhile
                    continue
                if os.path.isfile(path) and not os.path.islink(path):
                    out[os.path.relpath(path, self.dir).replace(os.sep, "/")] = (st.st_size, st.st_mtime_ns)
        return out

    def _path(self, rel: str) -> str:
        path = os.path.abspath(os.path.join(self.dir, rel))
        if os.path.commonpath([path, os.path.abspath(self.dir)]) != os.path.abspath(self.dir):
            raise SystemExit(f"trainctl-agent: checkpoint key {rel!r} leads outside {self.dir}; refusing it")
        return path

    # ------------------------------------------------------------ restore
    def restore(self) -> list[str]:
        """Fetch every checkpoint file S3 holds that this node lacks; returns the files fetched."""
        with self.lock:
            os.makedirs(self.dir, exist_ok=True)
            here, fetched = self.local(), []
            for rel, size in sorted(self.remote().items(), key=lambda kv: (kv[0].endswith(MANIFEST), kv[0])):
                if being_written(rel):
                    continue
                path = self._path(rel)
                if rel not in here or here[rel][0] != size:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    temp = f"{path}.trainctl.download"  # a temporary name: never uploaded, never a checkpoint
                    self.s3.download_file(self.bucket, self.prefix + rel, temp, ExtraArgs=self.owner)
                    os.replace(temp, path)
                    fetched.append(rel)
                st = os.stat(path)
                self.synced[rel] = (st.st_size, st.st_mtime_ns)
            if fetched:
                self.say(f"trainctl-agent: restored {len(fetched)} checkpoint files from s3://{self.bucket}/"
                         f"{self.prefix}")
            return fetched

    # ------------------------------------------------------------ upload, mirror deletions
    def _ready(self, rel: str, sig: tuple[int, int], final: bool, now: float) -> bool:
        if being_written(rel):
            return False
        if final:
            return True
        still = self.seen.get(rel) == sig
        return still or now - sig[1] / 1e9 >= self.settle_s

    def sync(self, final: bool = False) -> int:
        """Upload what changed and is complete; delete in S3 what this agent synced and the script deleted.
        `final`: the training has exited, nothing is being written. Returns the files uploaded."""
        with self.lock:
            here, now, count = self.local(), time.time(), 0
            changed = {rel: sig for rel, sig in here.items() if self.synced.get(rel) != sig}
            ready = {rel for rel, sig in changed.items() if self._ready(rel, sig, final, now)}
            blocked = {os.path.dirname(rel) for rel in changed if rel not in ready and not being_written(rel)}
            for rel in sorted(ready, key=lambda r: (os.path.basename(r) == MANIFEST, r)):
                folder = os.path.dirname(rel)
                if os.path.basename(rel) == MANIFEST and folder in blocked:
                    continue  # its folder is not complete yet: the manifest follows next round
                if self._upload(rel, here[rel]):
                    count += 1
                elif os.path.basename(rel) != MANIFEST:
                    blocked.add(folder)
            self.seen = here
            gone = sorted((r for r in self.synced if r not in here), key=lambda r: (os.path.basename(r) != MANIFEST, r))
            for rel in gone:
                self.s3.delete_object(Bucket=self.bucket, Key=self.prefix + rel, **self.owner)
                del self.synced[rel]
            return count

    def _upload(self, rel: str, sig: tuple[int, int]) -> bool:
        path = os.path.join(self.dir, rel)
        try:
            self.s3.upload_file(path, self.bucket, self.prefix + rel, ExtraArgs=self.owner)
            st = os.stat(path)
        except FileNotFoundError:  # renamed or deleted while uploading: the next look sees what is there
            return False
        if (st.st_size, st.st_mtime_ns) != sig:  # written to while uploading: upload it again next round
            return False
        self.synced[rel] = sig
        return True
