"""The EC2 side of a job's `data:` channels: what the node agent is told to fetch (bootstrap/channels.py does
it on the node) and which S3 prefixes the nodes' role must read.

Each S3 channel becomes {"bucket", "prefix", "mode"} in the agent's config: `copy` and `sharded` are copied to
/opt/ml/input/data/NAME before torchrun starts (`sharded`: the node's share of the sorted keys, by its rank, as
SageMaker's ShardedByS3Key gives each instance 1/N of the objects); `stream` is mounted with Mountpoint for
Amazon S3 where the node has `mount-s3`, its throughput capped at what the plan leaves the data, and copied
otherwise (the agent logs which).
"""
from __future__ import annotations

from trainctl.backends.data_checks import data_reads  # noqa: F401 (the nodes' role reads these)
from trainctl.errors import UsageError
from trainctl.spec.data import FsxChannel


def node_channels(data: dict | None, option=None, notes: list[str] | None = None) -> dict:
    """The agent config's `channels` member; an FSx channel is refused here (the agent cannot mount Lustre yet).
    A `stream` channel carries the plan's cap for mount-s3 (`max_gbps`): the link's baseline less the gradients'
    share, so that streamed reads leave the all-reduce the bandwidth the plan gave it."""
    channels = {}
    cap = getattr(getattr(option, "data", None), "stream_cap_gbps", None)
    for name, source in sorted((data or {}).items()):
        if isinstance(source, FsxChannel):
            raise UsageError(f"data: channel {name} is an FSx file system; on EC2 trainctl's node agent does not "
                             "mount FSx for Lustre yet: launch it with --platform sagemaker, or give an S3 prefix")
        channels[name] = {"bucket": source.bucket, "prefix": source.prefix, "mode": source.mode}
        if source.mode == "stream" and cap:
            channels[name]["max_gbps"] = cap
        if source.mode == "stream" and notes is not None:
            notes.append(f"channel {name}: mount-s3 --maximum-throughput-gbps {cap} per node (the plan's link "
                         "baseline less the gradients' share)" if cap else
                         f"channel {name}: mount-s3 at its default throughput, the instance's whole bandwidth: the "
                         f"plan could not size the stream (give data.{name}.bytes_per_sample)")
    return {"channels": channels} if channels else {}

