"""The EC2 side of a job's `data:` channels: what the node agent is told to fetch (bootstrap/channels.py does
it on the node) and which S3 prefixes the nodes' role must read.

Each S3 channel becomes {"bucket", "prefix", "mode"} in the agent's config: `copy` and `sharded` are copied to
/opt/ml/input/data/NAME before torchrun starts (`sharded`: the node's share of the sorted keys, by its rank, as
SageMaker's ShardedByS3Key gives each instance 1/N of the objects); `stream` is mounted with Mountpoint for
Amazon S3 where the node has `mount-s3`, and copied otherwise (the agent logs which).
"""
from __future__ import annotations

from trainctl.backends.data_checks import data_reads  # noqa: F401 (the nodes' role reads these)
from trainctl.errors import UsageError
from trainctl.spec.data import FsxChannel


def node_channels(data: dict | None) -> dict:
    """The agent config's `channels` member; an FSx channel is refused here (the agent cannot mount Lustre yet)."""
    channels = {}
    for name, source in sorted((data or {}).items()):
        if isinstance(source, FsxChannel):
            raise UsageError(f"data: channel {name} is an FSx file system; on EC2 trainctl's node agent does not "
                             "mount FSx for Lustre yet: launch it with --platform sagemaker, or give an S3 prefix")
        channels[name] = {"bucket": source.bucket, "prefix": source.prefix, "mode": source.mode}
    return {"channels": channels} if channels else {}

