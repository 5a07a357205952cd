"""The node agent's checkpoint exchange with S3 (standard library plus the agent's boto3 client).

A checkpoint is a unit named by the entrypoints (trainctl/entrypoints): a whole-state file
`ckpt-<step>-<digest>.pt` (complete once it has its name: the entrypoint renames it into place), or a sharded
folder `step-<step>/` (complete once its `manifest.json` exists: the entrypoint writes it last, and this
module uploads it last). Under s3://<bucket>/<job>/checkpoints/ a unit is one key or one key prefix.

A long job saves hundreds of checkpoints; a node keeps its disk and the bucket bounded:
- restore fetches only the newest complete step (or the newest `restore` steps), never the history;
- after each successful upload the bucket is pruned to the newest `keep` complete steps. Units of steps newer
  than the newest complete one (another node's upload in flight) are never touched.
"""
from __future__ import annotations

import os
import re
import shutil

WHOLE_RE = re.compile(r"^ckpt-(\d{10})-[0-9a-f]{16}\.pt$")
SHARDED_RE = re.compile(r"^step-(\d{10})$")
MANIFEST = "manifest.json"


def unit_step(name: str) -> int | None:
    match = WHOLE_RE.match(name) or SHARDED_RE.match(name)
    return int(match.group(1)) if match else None


def _complete(name: str, files: dict[str, int]) -> bool:
    return bool(WHOLE_RE.match(name)) or MANIFEST in files


def complete_steps(units: dict[str, dict[str, int]]) -> list[int]:
    """Steps with at least one complete unit, newest first."""
    return sorted({unit_step(n) for n, files in units.items() if _complete(n, files)}, reverse=True)


class CheckpointSync:
    def __init__(self, s3, bucket: str, prefix: str, local_dir: str, keep: int, say, owner: dict | None = None):
        self.s3, self.bucket, self.prefix = s3, bucket, prefix.rstrip("/") + "/"
        self.dir, self.keep, self.say = local_dir, max(1, keep), say
        self.owner = owner or {}  # {"ExpectedBucketOwner": account}: a bucket of another account is refused

    # ------------------------------------------------------------ what exists
    def remote(self) -> dict[str, dict[str, int]]:
        """unit name -> {path inside the unit ("" for a whole file): size}."""
        units: dict[str, dict[str, int]] = {}
        kwargs = {"Bucket": self.bucket, "Prefix": self.prefix, **self.owner}
        while True:
            page = self.s3.list_objects_v2(**kwargs)
            for obj in page.get("Contents", []):
                name, _, inner = obj["Key"][len(self.prefix):].partition("/")
                if unit_step(name) is not None:
                    units.setdefault(name, {})[inner] = obj["Size"]
            if not page.get("IsTruncated"):
                return units
            kwargs["ContinuationToken"] = page["NextContinuationToken"]

    def local(self) -> dict[str, dict[str, int]]:
        units: dict[str, dict[str, int]] = {}
        names = os.listdir(self.dir) if os.path.isdir(self.dir) else []
        for name in names:
            path = os.path.join(self.dir, name)
            if WHOLE_RE.match(name) and os.path.isfile(path):
                units[name] = {"": os.path.getsize(path)}
            elif SHARDED_RE.match(name) and os.path.isfile(os.path.join(path, MANIFEST)):
                units[name] = {os.path.relpath(os.path.join(root, f), path): os.path.getsize(os.path.join(root, f))
                               for root, _, files in os.walk(path) for f in files}
        return units

    def _key(self, name: str, inner: str) -> str:
        return self.prefix + name + (f"/{inner}" if inner else "")

    # ------------------------------------------------------------ restore
    def restore(self, count: int = 1) -> list[str]:
        """Fetch the newest `count` complete steps that are not here yet; returns the units fetched."""
        os.makedirs(self.dir, exist_ok=True)
        remote, here = self.remote(), self.local()
        here_steps = {unit_step(n) for n in here}
        fetched = []
        for step in complete_steps(remote)[:max(1, count)]:
            if step in here_steps:
                continue
            name = sorted(n for n, files in remote.items() if unit_step(n) == step and _complete(n, files))[-1]
            self._download(name, remote[name])
            fetched.append(name)
        return fetched

    def _download(self, name: str, files: dict[str, int]) -> None:
        # Beside and renamed: the entrypoint must never see a half-written checkpoint. The temp name starts
        # with a dot, which no entrypoint pattern matches.
        temp = os.path.join(self.dir, f".{name}.download")
        shutil.rmtree(temp, ignore_errors=True)
        for inner in sorted(files):
            target = os.path.join(temp, inner) if inner else temp
            os.makedirs(os.path.dirname(target), exist_ok=True)
            self.s3.download_file(self.bucket, self._key(name, inner), target, ExtraArgs=self.owner)
        os.replace(temp, os.path.join(self.dir, name))
        self.say(f"trainctl-agent: restored checkpoint {name}")

    # ------------------------------------------------------------ upload, then prune
    def sync(self) -> None:
        """Upload this node's complete units of the newest `keep` steps that S3 lacks, then prune S3."""
        remote, here = self.remote(), self.local()
        kept = set(sorted(set(complete_steps(remote)) | set(complete_steps(here)), reverse=True)[:self.keep])
        for name in sorted(here):
            if unit_step(name) in kept:
                self._upload(name, here[name], remote.get(name, {}))
        self.prune()

    def _upload(self, name: str, files: dict[str, int], there: dict[str, int]) -> None:
        # The manifest goes last: a sharded step is complete in S3 only once every shard is there.
        for inner in sorted(files, key=lambda f: (f == MANIFEST, f)):
            if there.get(inner) != files[inner]:
                path = os.path.join(self.dir, name, inner) if inner else os.path.join(self.dir, name)
                self.s3.upload_file(path, self.bucket, self._key(name, inner), ExtraArgs=self.owner)

    def prune(self) -> list[str]:
        """Delete from S3 every unit older than the newest `keep` complete steps; returns the units deleted."""
        remote = self.remote()
        steps = complete_steps(remote)
        if len(steps) <= self.keep:
            return []
        oldest_kept = steps[self.keep - 1]
        gone = sorted(n for n in remote if unit_step(n) < oldest_kept)
        for name in gone:
            for inner in sorted(remote[name], key=lambda f: (f != MANIFEST, f)):  # manifest first: incomplete
                self.s3.delete_object(Bucket=self.bucket, Key=self._key(name, inner), **self.owner)
        if gone:
            self.say(f"trainctl-agent: pruned {len(gone)} old checkpoints from S3 (keeping {self.keep} steps)")
        return gone
