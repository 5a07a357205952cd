"""The job's input channels on an EC2 node, where SageMaker puts them: /opt/ml/input/data/NAME, named in
$SM_CHANNEL_NAME, so a script written for SageMaker runs unchanged.

- `copy`: every object under the prefix, downloaded in parallel (boto3's transfer manager per object, several
  objects at once) before torchrun starts;
- `sharded`: this node's share of the sorted keys (every nnodes-th key from its rank), as SageMaker's
  ShardedByS3Key gives each instance a share of the objects; a replacement node with another rank gets its share;
- `stream`: Mountpoint for Amazon S3 (`mount-s3`, read-only) where the node has it, with its throughput capped
  when the config says how much; without it the channel is copied, and the log says so.

/opt/ml sits beside the agent's own folder (/opt/trainctl -> /opt/ml), so wherever the user data roots the agent,
the job's tree follows.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

from . import fsx

PARALLEL_OBJECTS = 16  # objects in flight at once; each large one is itself split by the transfer manager


def ml_root(agent_root: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(agent_root)), "ml")


def input_data_config(channels: dict) -> dict:
    """SageMaker's inputdataconfig.json for the channels: how each reaches the job, and whether each host holds only
    its share of the objects (S3DistributionType), so a script can tell a sharded channel the same way on both."""
    modes = {"copy": "File", "sharded": "File", "stream": "FastFile"}
    return {name: {"TrainingInputMode": modes.get(channel.get("mode"), "File"), "RecordWrapperType": "None",
                   "S3DistributionType": "ShardedByS3Key" if channel.get("mode") == "sharded" else "FullyReplicated"}
            for name, channel in sorted(channels.items())}


def job_env(ml: str, channels: dict) -> dict[str, str]:
    """SageMaker's SM_* variables for the channels, the model and the output data (training toolkit names)."""
    env = {f"SM_CHANNEL_{name.upper()}": os.path.join(ml, "input", "data", name) for name in channels}
    env.update(SM_MODEL_DIR=os.path.join(ml, "model"), SM_OUTPUT_DATA_DIR=os.path.join(ml, "output", "data"),
               SM_CHANNELS=json.dumps(sorted(channels)), SM_INPUT_CONFIG_DIR=os.path.join(ml, "input", "config"),
               SM_INPUT_DATA_CONFIG=json.dumps(input_data_config(channels)))
    return env


def keys_under(s3, bucket: str, prefix: str) -> list[str]:
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", []) if not o["Key"].endswith("/")]
    return sorted(keys)


def not_a_file(keys: list[str], prefix: str) -> tuple[str, str] | None:
    """The first key (and why) that cannot become a file under the channel's folder: a name part over 255 bytes
    (Linux's NAME_MAX), or a key that is also another key's folder (`a` beside `a/b`). The launch checks the same
    on the listing's first page (backends/data_checks.py: unmaterialisable; the agent imports nothing of trainctl);
    the node checks every key before it copies one, so a bad key fails it at once, named, not after hours of copy."""
    files, folders = {}, set()
    for key in keys:
        parts = [p for p in key[len(prefix):].split("/") if p not in ("", ".")]
        if not parts:
            continue
        if any(len(p.encode()) > 255 for p in parts):
            return key, "a part of its name is longer than 255 bytes, Linux's limit"
        files["/".join(parts)] = key
        folders.update("/".join(parts[:i]) for i in range(1, len(parts)))
    clash = sorted(set(files) & folders)
    return (files[clash[0]], "another key uses it as a folder (keys `a` and `a/b`)") if clash else None


def _refuse(bucket: str, key: str, why: str) -> SystemExit:
    return SystemExit(f"trainctl-agent: data object s3://{bucket}/{key} cannot be a file on this node: {why}; "
                      "rename it in the bucket and launch again")


def download(s3, bucket: str, prefix: str, keys: list[str], dest: str) -> int:
    """The keys to dest, relative to the prefix, in parallel; the bytes written. A key that cannot be a file here
    fails the node before anything is copied, naming the key (any other refusal of the file system names it too)."""
    from boto3.s3.transfer import TransferConfig

    config = TransferConfig(max_concurrency=4)
    bad = not_a_file(keys, prefix)
    if bad:
        raise _refuse(bucket, *bad)

    def one(key: str) -> int:
        rel = key[len(prefix):].lstrip("/") or key.rsplit("/", 1)[-1]
        path = os.path.join(dest, rel)
        if os.path.commonpath([os.path.abspath(path), os.path.abspath(dest)]) != os.path.abspath(dest):
            raise SystemExit(f"trainctl-agent: object key {key!r} leads outside {dest}; refusing it")
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            s3.download_file(bucket, key, path, Config=config)
        except OSError as e:  # a name the file system refuses, or a full disk: named; any other error as it is
            if e.errno == errno.ENOSPC:
                raise SystemExit(disk_full(bucket, key, dest)) from None
            if e.errno not in (errno.EEXIST, errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG):
                raise
            raise _refuse(bucket, key, f"{e.strerror or e} at {path}") from None
        return os.path.getsize(path)

    with ThreadPoolExecutor(PARALLEL_OBJECTS) as pool:
        return sum(pool.map(one, keys))


def disk_full(bucket: str, key: str, dest: str) -> str:
    """One line for a copy that filled the node's disk: which object, where, what is left, what to do."""
    try:
        free = shutil.disk_usage(dest).free / 2 ** 30
    except OSError:
        free = 0.0
    return (f"s3://{bucket}/{key} does not fit this node's disk at {dest} (No space left on device, "
            f"{free:,.1f} GiB free): the data grew past what the launch sized the disk for; launch again to size it "
            "from the data now, or stream the channel (data.<name>.mode: stream)")


def mount(channel: dict, dest: str, log) -> bool:
    """mount-s3 read-only at dest; False when the node has no mount-s3 or the mount fails."""
    tool = shutil.which("mount-s3")
    if not tool:
        return False
    cmd = [tool, "--read-only", channel["bucket"], dest]
    if channel.get("prefix"):  # mount-s3 refuses a --prefix that does not end in '/' (mount-s3 --help)
        cmd[2:2] = ["--prefix", channel["prefix"].rstrip("/") + "/"]
    if channel.get("max_gbps"):  # leave the gradients their share of the link (mount-s3 takes whole Gbps, >= 1)
        cmd[2:2] = ["--maximum-throughput-gbps", str(max(1, int(channel["max_gbps"])))]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        log(f"trainctl-agent: mount-s3 failed ({done.stderr.strip()[:200]}); copying instead")
    return done.returncode == 0


class Channels:
    """Fetches the config's channels once per (rank, nnodes): a sharded channel is fetched again when a
    replacement changes this node's rank."""

    def __init__(self, s3, channels: dict, ml: str, log):
        self.s3, self.channels, self.ml, self.log = s3, channels, ml, log
        self.fetched: dict[str, tuple[int, int]] = {}

    def env(self) -> dict[str, str]:
        return job_env(self.ml, self.channels)

    def prepare(self, rank: int, nnodes: int) -> None:
        for sub in ("model", "output/data", "output/tensorboard", "input/config"):
            os.makedirs(os.path.join(self.ml, sub), exist_ok=True)
        with open(os.path.join(self.ml, "input", "config", "inputdataconfig.json"), "w") as handle:
            json.dump(input_data_config(self.channels), handle)
        for name, channel in sorted(self.channels.items()):
            shard = (rank, nnodes) if channel["mode"] == "sharded" else (0, 1)
            if self.fetched.get(name) == shard:
                continue
            dest = os.path.join(self.ml, "input", "data", name)
            shutil.rmtree(dest, ignore_errors=True)
            os.makedirs(dest, exist_ok=True)
            self.fetch(name, channel, dest, shard)
            self.fetched[name] = shard

    def fetch(self, name: str, channel: dict, dest: str, shard: tuple[int, int]) -> None:
        if channel["mode"] == "mount":  # an FSx for Lustre file system (fsx.py), no S3
            return fsx.mount(name, channel, dest, self.log)
        uri = f"s3://{channel['bucket']}/{channel['prefix']}"
        if channel["mode"] == "stream":
            if mount(channel, dest, self.log):
                self.log(f"trainctl-agent: channel {name}: {uri} mounted with mount-s3 at {dest}")
                return
            self.log(f"trainctl-agent: channel {name}: no mount-s3 on this node; copying {uri} instead of streaming")
        keys = keys_under(self.s3, channel["bucket"], channel["prefix"])
        mine = keys[shard[0]::shard[1]]
        size = download(self.s3, channel["bucket"], channel["prefix"], mine, dest)
        part = f" (shard {shard[0] + 1} of {shard[1]})" if channel["mode"] == "sharded" else ""
        self.log(f"trainctl-agent: channel {name}: {len(mine)} of {len(keys)} objects{part}, {size} bytes, "
                 f"from {uri} to {dest}")
