"""The spec's `data:` section: the job's input channels, each an S3 prefix or an FSx for Lustre directory.

Short form `data: {train: s3://bucket/prefix/}`; long form `data: {train: {uri: s3://..., mode: copy}}`; FSx
`data: {train: {fsx: fs-0123456789abcdef0, path: /mountname/dir}}`. The job sees channel NAME at
/opt/ml/input/data/NAME and in $SM_CHANNEL_NAME on both platforms (SageMaker's convention, so a script written for
SageMaker runs unchanged on EC2).
"""
from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator

# SageMaker's ChannelName is [A-Za-z0-9.\-_]+ (1-64, botocore sagemaker service-2 `ChannelName`); narrowed to what
# makes SM_CHANNEL_<NAME> a valid shell variable, since the job reads the channel's path from it.
CHANNEL_NAME = r"^[A-Za-z][A-Za-z0-9_]{0,63}$"
# S3 bucket naming rules (AWS S3 User Guide, "Bucket naming rules"): 3-63 characters, lower-case letters, digits,
# dots and hyphens, starting and ending with a letter or digit.
S3_URI_RE = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(/(?P<prefix>.*))?$")
# FSx file system ids: fs- then 8 or 17 hex digits (botocore fsx service-2 `FileSystemId`: ^(fs-[0-9a-f]{8,})$).
FSX_ID = r"^fs-[0-9a-f]{8,21}$"
# SageMaker FileSystemDataSource.DirectoryPath for FSx for Lustre starts with the file system's mount name.
FSX_PATH = r"^/[A-Za-z0-9_.-]{1,64}(/[^\x00-\x1f]{0,3995})?$"
DataMode = Literal["copy", "stream", "sharded"]
CHANNEL_ROOT = "/opt/ml/input/data"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class S3Channel(_Strict):
    uri: str = Field(description="s3://bucket/prefix/ in your own bucket")
    mode: DataMode = Field("copy", description="copy: whole prefix to local disk at start (SageMaker File mode); "
                                               "stream: read while training (FastFile; mount-s3 on EC2); sharded: "
                                               "each node copies its share of the objects (ShardedByS3Key)")
    size_gb: float | None = Field(None, gt=0, le=1e7, description="the prefix's size; measured with ListObjectsV2 "
                                                                   "when not given")
    bytes_per_sample: float | None = Field(None, gt=0, le=1e12,
                                           description="bytes read per training sample (default: size / dataset)")

    @field_validator("uri")
    @classmethod
    def an_s3_prefix(cls, uri: str) -> str:
        if not S3_URI_RE.match(uri):
            raise ValueError(f"{uri[:80]!r} is not an S3 prefix s3://BUCKET/PREFIX/ (a bucket name is 3-63 lower-case "
                             "letters, digits, dots and hyphens)")
        return uri

    @property
    def bucket(self) -> str:
        return S3_URI_RE.match(self.uri)["bucket"]

    @property
    def prefix(self) -> str:
        return S3_URI_RE.match(self.uri)["prefix"] or ""


class FsxChannel(_Strict):
    fsx: str = Field(pattern=FSX_ID, description="an FSx for Lustre file system id in the job's VPC and AZ")
    path: str = Field(pattern=FSX_PATH, description="/MOUNTNAME/dir on the file system")
    size_gb: float | None = Field(None, gt=0, le=1e7, description="the data's size, for the plan")
    bytes_per_sample: float | None = Field(None, gt=0, le=1e12)

    @property
    def mode(self) -> str:
        return "mount"


def _short_form(value: object) -> object:
    """`train: s3://bucket/prefix/` is `train: {uri: s3://bucket/prefix/}`."""
    return {"uri": value} if isinstance(value, str) else value


def _kind(value: object) -> str:
    """A channel with the key `fsx` is an FSx channel, any other an S3 one: errors then name the right fields."""
    if isinstance(value, dict):
        return "fsx" if "fsx" in value else "s3"
    return "fsx" if isinstance(value, FsxChannel) else "s3"


Channel = Annotated[Annotated[S3Channel, Tag("s3")] | Annotated[FsxChannel, Tag("fsx")], Discriminator(_kind)]
ChannelName = Annotated[str, Field(pattern=CHANNEL_NAME)]


def channels_problem(channels: dict[str, object], entrypoint: object = None) -> str | None:
    """What is wrong with a whole `data:` section, or None. The bundled entrypoints read the channel `train`; a
    script of the user's (an entrypoint whose `bundled` is None) reads whichever channels it names (SageMaker's SDK
    examples use `training`). Without a valid entrypoint, `train` is asked for."""
    needs_train = getattr(entrypoint, "bundled", "") is not None
    if not channels:
        return "data: is empty; name at least the channel `train`, e.g. data: {train: s3://bucket/prefix/}"
    if needs_train and "train" not in channels:
        return (f"data: has no channel `train` (it has {', '.join(sorted(channels))}); the bundled entrypoints read "
                "the channel `train`")
    if len({name.upper() for name in channels}) != len(channels):
        return "data: two channel names differ only in case; SM_CHANNEL_<NAME> would be the same variable"
    return None


def channel_path(name: str) -> str:
    return f"{CHANNEL_ROOT}/{name}"


def channel_env(name: str) -> str:
    return f"SM_CHANNEL_{name.upper()}"
