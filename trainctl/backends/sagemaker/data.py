"""What a SageMaker job's CreateTrainingJob says about its data: the spec's `data:` channels as InputDataConfig,
and where TensorBoard events go (TensorBoardOutputConfig).

The fields and their values are botocore's sagemaker service-2 model (`Channel`, `S3DataSource`,
`FileSystemDataSource`, `TensorBoardOutputConfig`) and the CreateTrainingJob API reference (docs/aws-rules.md):
- an S3 prefix is `S3DataType: S3Prefix`; `copy` and `sharded` are `InputMode: File` (the objects copied to
  /opt/ml/input/data/NAME before the script starts), `stream` is `FastFile` (read on demand, same path);
  `sharded` is `S3DataDistributionType: ShardedByS3Key` (each instance gets 1/N of the objects), the others
  `FullyReplicated`;
- an FSx for Lustre directory is `FileSystemDataSource` with `FileSystemType: FSxLustre`, read-only
  (`FileSystemAccessMode: ro`), `DirectoryPath` /MOUNTNAME/dir; the job must then run in the file system's VPC
  (VpcConfig), which the launch gives it even for one node.
"""
from __future__ import annotations

from trainctl.spec.data import FsxChannel

TENSORBOARD_LOCAL = "/opt/ml/output/tensorboard"  # TensorBoardOutputConfig.LocalPath's default
INPUT_MODE = {"copy": "File", "sharded": "File", "stream": "FastFile"}


def channel(name: str, source) -> dict:
    """One InputDataConfig entry (botocore `Channel`)."""
    if isinstance(source, FsxChannel):
        return {"ChannelName": name, "InputMode": "File", "DataSource": {"FileSystemDataSource": {
            "FileSystemId": source.fsx, "FileSystemType": "FSxLustre", "FileSystemAccessMode": "ro",
            "DirectoryPath": source.path}}}
    distribution = "ShardedByS3Key" if source.mode == "sharded" else "FullyReplicated"
    return {"ChannelName": name, "InputMode": INPUT_MODE[source.mode], "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": source.uri, "S3DataDistributionType": distribution}}}


def input_data_config(data: dict | None) -> list[dict]:
    return [channel(name, source) for name, source in sorted((data or {}).items())]


def needs_vpc(data: dict | None) -> bool:
    """An FSx channel is reached only from inside its VPC: the job needs a VpcConfig even on one node."""
    return any(isinstance(source, FsxChannel) for source in (data or {}).values())


def tensorboard_output(bucket: str, job_id: str) -> dict:
    return {"LocalPath": TENSORBOARD_LOCAL, "S3OutputPath": f"s3://{bucket}/{job_id}/tensorboard"}


def data_params(spec, bucket: str, job_id: str, notes: list[str]) -> dict:
    """The CreateTrainingJob members for the job's data and TensorBoard events, with a note per channel."""
    params: dict = {"TensorBoardOutputConfig": tensorboard_output(bucket, job_id)}
    if spec.data:
        params["InputDataConfig"] = input_data_config(spec.data)
        for entry in params["InputDataConfig"]:
            source = entry["DataSource"].get("S3DataSource") or entry["DataSource"]["FileSystemDataSource"]
            where = source.get("S3Uri") or f"{source['FileSystemId']}:{source['DirectoryPath']}"
            notes.append(f"channel {entry['ChannelName']}: {where} ({entry['InputMode']}"
                         + (", ShardedByS3Key" if source.get("S3DataDistributionType") == "ShardedByS3Key" else "")
                         + f") at /opt/ml/input/data/{entry['ChannelName']}")
    notes.append(f"model to s3://{bucket}/{job_id}/output/, TensorBoard events from {TENSORBOARD_LOCAL} to "
                 f"{params['TensorBoardOutputConfig']['S3OutputPath']}/")
    return params



def lustre_calls(client_for, region: str, data: dict | None, vpc_config: dict | None, job_id: str,
                 user_group: str | None, notes: list[str]) -> list:
    """An FSx channel on SageMaker, as on EC2 (backends/lustre_network.py): SageMaker mounts the file system from
    the job's network interfaces in its VpcConfig, so the file system's groups must let the job's subnets (or
    --security-group) in on TCP 988 and 1018-1023 (else one line, before anything is created), and the job's own
    group gets those ports in from the file system's groups."""
    from trainctl.backends import lustre_network

    sources = {name: s for name, s in (data or {}).items() if isinstance(s, FsxChannel)}
    if not sources or not vpc_config:
        return []
    ec2, channels = client_for("ec2", region), {}
    for name, source in sources.items():
        found = client_for("fsx", region).describe_file_systems(FileSystemIds=[source.fsx])["FileSystems"]
        if not found:
            continue  # the data checks refuse an unknown file system in their own words
        groups = lustre_network.file_system_groups(ec2, found[0])
        lustre_network.refuse_unreachable(ec2, name, source.fsx, groups, list(vpc_config["Subnets"]), user_group)
        channels[name] = {"mode": "mount", "security_groups": groups}
    if channels:
        notes.append(f"Lustre (TCP 988, 1018-1023) between the job and {', '.join(s.fsx for s in sources.values())}")
    return lustre_network.lustre_ingress(channels, vpc_config["SecurityGroupIds"][0], job_id, region, user_group)
