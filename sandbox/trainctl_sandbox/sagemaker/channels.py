"""Input channels and TensorBoard output of sandbox SageMaker jobs, as SageMaker handles them:
- each S3 channel's objects copied into every host's /opt/ml/input/data/NAME; `ShardedByS3Key` gives host i of N
  every N-th of the sorted keys (SageMaker: each instance gets a share, 1/N, of the objects); `FastFile` is not
  simulated: the sandbox copies the objects and the job's log says so;
- File-mode data over a host's storage (its NVMe instance storage, else VolumeSizeInGB) fails the job in
  Downloading with SageMaker's "Insufficient disk space" (volumes.py);
- a channel whose bucket is in another region than the job fails the job in Downloading, as SageMaker's data
  download does (the bucket must be in the job's region);
- an FSx `FileSystemDataSource` whose file system does not exist is refused at CreateTrainingJob
  (ValidationException); an existing one's directory (the sandbox's stand-in for the file system's contents,
  ec2/lustre.py) is copied into every host's channel folder, and the job's log says SageMaker mounts it instead; a
  `DirectoryPath` that does not start with the file system's mount name, or names no directory on it, fails the
  job in Downloading;
- fsx DescribeFileSystems naming an id that does not exist answers FileSystemNotFound, as AWS does (fsx
  service-2 `DescribeFileSystems` errors); moto answers an empty list (`install`);
- TensorBoard events under TensorBoardOutputConfig.LocalPath (default /opt/ml/output/tensorboard) synced to its
  S3OutputPath while the job runs and when it ends.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from trainctl_sandbox.sagemaker import volumes
from trainctl_sandbox.server.moto_s3 import MotoS3, parse_s3_uri, s3_error

TENSORBOARD_LOCAL = "/opt/ml/output/tensorboard"


def install(ctx: Any) -> None:
    """FSx's DescribeFileSystems refuses an unknown id with FileSystemNotFound (moto lists what it finds)."""
    from moto.fsx.exceptions import FileSystemNotFound
    from moto.fsx.models import FSxBackend

    listed = getattr(FSxBackend.describe_file_systems, "trainctl_strict", None) or FSxBackend.describe_file_systems

    def describe_file_systems(self, file_system_ids, *args, **kwargs):
        for fs_id in file_system_ids or []:
            if fs_id not in self.file_systems:
                raise FileSystemNotFound(fs_id)
        return listed(self, file_system_ids, *args, **kwargs)

    describe_file_systems.trainctl_strict = listed
    FSxBackend.describe_file_systems = describe_file_systems


def _s3_source(channel: dict[str, Any]) -> dict[str, Any]:
    return (channel.get("DataSource") or {}).get("S3DataSource") or {}


def fsx_refusal(request: dict[str, Any], account_id: str, region: str) -> str | None:
    """A ValidationException message for an FSx channel whose file system does not exist, else None."""
    from moto.fsx.models import fsx_backends

    known = fsx_backends[account_id][region].file_systems
    for channel in request.get("InputDataConfig") or []:
        fs = (channel.get("DataSource") or {}).get("FileSystemDataSource")
        if fs and fs.get("FileSystemId") not in known:
            return (f"FileSystem {fs.get('FileSystemId')} of channel {channel.get('ChannelName')} does not exist "
                    f"in {region}.")
    return None


def fsx_files(ctx: Any, account: str, region: str, name: str,
              source: dict[str, Any], vpc: dict | None = None) -> list[tuple[str, bytes]] | str:
    """The files of an FSx channel's DirectoryPath (/MOUNTNAME/dir), or the job's failure reason. SageMaker mounts
    it from the job's network interfaces in its VpcConfig, so the Lustre ports are checked as for an EC2 node
    (ec2/lustre.py; FSx for Lustre User Guide, "File system access control with Amazon VPC")."""
    from moto.fsx.models import fsx_backends

    from trainctl_sandbox.ec2.lustre import folder

    fs = fsx_backends[account][region].file_systems.get(source.get("FileSystemId"))
    if fs is not None and vpc and (why := _lustre_blocked(account, region, fs, vpc)):
        return f"ClientError: Data download failed: channel {name}: could not mount {fs.file_system_id}: {why}"
    mount = ((getattr(fs, "lustre_configuration", None) or {}).get("MountName")) if fs else None
    first, _, rest = str(source.get("DirectoryPath", "")).strip("/").partition("/")
    if fs is None or first != mount:
        return (f"ClientError: Data download failed: channel {name}: DirectoryPath {source.get('DirectoryPath')} "
                f"does not start with the mount name /{mount} of {source.get('FileSystemId')}")
    root = (folder(ctx, fs.file_system_id) / rest).resolve()
    if not root.is_dir():
        return f"ClientError: Data download failed: channel {name}: no directory {source.get('DirectoryPath')}"
    return [(p.relative_to(root).as_posix(), p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file()]


def _lustre_blocked(account: str, region: str, fs: Any, vpc: dict) -> str | None:
    import ipaddress

    from moto.ec2.models import ec2_backends

    from trainctl_sandbox.ec2.lustre import blocked_between

    ec2 = ec2_backends[account][region]
    ips = [str(next(ipaddress.ip_network(ec2.get_subnet(s).cidr_block).hosts())) for s in vpc.get("Subnets") or []]
    return blocked_between(ec2, fs, list(vpc.get("SecurityGroupIds") or []), ips, "the training job")


def input_channels(s3: MotoS3, request: dict[str, Any], region: str, hosts: int, fsx: Any = None,
                   gb_bytes: float = 1e9) -> list[dict[str, list[tuple[str, bytes]]]] | str:
    """Per host (index 0..N-1): every channel's files as (relative path, bytes); or the job's failure reason.
    `fsx(name, FileSystemDataSource)`: an FSx channel's files (fsx_files), the same on every host. A host whose
    File-mode data does not fit its storage fails the job (volumes.py; `gb_bytes`: the sandbox's disk scale)."""
    out: list[dict[str, list[tuple[str, bytes]]]] = [{} for _ in range(hosts)]
    for channel in request.get("InputDataConfig") or []:
        name = channel["ChannelName"]
        source = (channel.get("DataSource") or {}).get("FileSystemDataSource")
        if source:
            files = fsx(name, source) if fsx else f"ClientError: channel {name}: no FSx here"
            if isinstance(files, str):
                return files
            for per_host in out:
                per_host[name] = list(files)
            continue
        uri = _s3_source(channel).get("S3Uri")
        for per_host in out:
            per_host[name] = []
        if not uri:
            continue
        bucket, prefix = parse_s3_uri(uri)
        try:
            home = s3.backend.get_bucket(bucket).region_name
            keys = [k for k in s3.keys(bucket, prefix) if not k.endswith("/")]
        except Exception as exc:  # noqa: BLE001
            return f"ClientError: Data download failed: could not list {uri}: {s3_error(exc)}"
        if home != region:
            return (f"ClientError: Data download failed: the S3 bucket {bucket} of channel {name} is in {home}, "
                    f"the training job in {region}; use a bucket in {region}")
        if not keys:
            return f"ClientError: Data download failed: no objects found under {uri}"
        sharded = _s3_source(channel).get("S3DataDistributionType") == "ShardedByS3Key"
        for index, per_host in enumerate(out):
            mine = keys[index::hosts] if sharded else keys
            per_host[name] = [(k[len(prefix):].lstrip("/") or k.rsplit("/", 1)[-1], s3.get(bucket, k)) for k in mine]
    return volumes.download_refusal(request, out, gb_bytes) or out


def log_notes(logs, stream: str, request: dict[str, Any]) -> None:
    """The job's log says how the sandbox stood in for SageMaker's input modes."""
    import time

    default = (request.get("AlgorithmSpecification") or {}).get("TrainingInputMode", "File")
    channels = request.get("InputDataConfig") or []
    for note in [f"sandbox: channel {c['ChannelName']} is FastFile on SageMaker (streamed on demand); the sandbox "
                 f"copied its objects to /opt/ml/input/data/{c['ChannelName']} instead"
                 for c in channels if (c.get("InputMode") or default) == "FastFile"] + [
                 f"sandbox: channel {c['ChannelName']} is FSx for Lustre on SageMaker (mounted); the sandbox copied "
                 f"its files to /opt/ml/input/data/{c['ChannelName']} instead"
                 for c in channels if (c.get("DataSource") or {}).get("FileSystemDataSource")]:
        logs.put(stream, note, time.time())


def sync_tensorboard(s3: MotoS3, request: dict[str, Any], bases: list[Path], uploaded: dict) -> None:
    """Files new or changed since the last sync under each host's TensorBoard folder -> S3OutputPath."""
    config = request.get("TensorBoardOutputConfig")
    if not config:
        return
    local = (config.get("LocalPath") or TENSORBOARD_LOCAL).rstrip("/")
    bucket, prefix = parse_s3_uri(config["S3OutputPath"])
    prefix = prefix.rstrip("/") + "/" if prefix.strip("/") else ""
    rel_local = local[len("/opt/ml/"):] if local.startswith("/opt/ml/") else local.lstrip("/")
    for base in bases:
        folder = base / rel_local
        if not folder.is_dir():
            continue
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            st = path.stat()
            if uploaded.get(path) == (st.st_size, st.st_mtime_ns):
                continue
            s3.put(bucket, prefix + path.relative_to(folder).as_posix(), path.read_bytes())
            uploaded[path] = (st.st_size, st.st_mtime_ns)
