"""The storage a SageMaker training host downloads its File-mode channels to, with its size, so that data that does
not fit fails the job as SageMaker fails it, whatever the caller planned.

A host's storage is the instance type's NVMe instance storage where it has some ("SageMaker doesn't provision
Amazon EBS gp2 storage. Available storage is fixed to the NVMe-type instance's storage capacity": botocore
`sagemaker` ResourceConfig.VolumeSizeInGB), else an EBS volume of `VolumeSizeInGB`. The type's instance storage is
EC2's DescribeInstanceTypes `InstanceStorageInfo.TotalSizeInGB` (moto's data, without the `ml.` prefix). File mode
copies every object of a channel (a ShardedByS3Key channel: the host's share) before the training starts; FastFile
and Pipe stream, and an FSx channel is mounted, so they take no room. Data over the storage fails the job in
Downloading with SageMaker's reason, "ClientError: Data download failed:Insufficient disk space" (as users quote it:
aws/sagemaker-python-sdk#128).

The sandbox scale: a GB is 10^9 bytes by default; `configure_training_jobs(disk_gb_bytes=N)` makes it N bytes, so that
a test can overrun a volume with megabytes (its data is then compared with the scaled volume; see ec2/node_disks.py).
"""
from __future__ import annotations

from typing import Any

INSUFFICIENT = "ClientError: Data download failed:Insufficient disk space"


def storage_gb(resource: dict[str, Any]) -> float:
    """GB a host of the job's ResourceConfig holds: its type's NVMe instance storage, else VolumeSizeInGB."""
    from trainctl_sandbox.server import ec2_data

    itype = str(resource.get("InstanceType") or "").removeprefix("ml.")
    nvme = ((ec2_data.instance_type_info(itype) or {}).get("InstanceStorageInfo") or {}).get("TotalSizeInGB")
    return float(nvme) if nvme else float(resource.get("VolumeSizeInGB") or 0)


def _copied(request: dict[str, Any]) -> set[str]:
    default = (request.get("AlgorithmSpecification") or {}).get("TrainingInputMode", "File")
    return {c["ChannelName"] for c in request.get("InputDataConfig") or []
            if (c.get("InputMode") or default) == "File" and not (c.get("DataSource") or {}).get("FileSystemDataSource")}


def download_refusal(request: dict[str, Any], per_host: list[dict[str, list[tuple[str, bytes]]]],
                     gb_bytes: float) -> str | None:
    """SageMaker's failure reason when some host's File-mode channels do not fit its storage, else None."""
    room = storage_gb(request.get("ResourceConfig") or {}) * gb_bytes
    copied = _copied(request)
    for channels in per_host:
        if sum(len(data) for name, files in channels.items() if name in copied for _, data in files) > room:
            return INSUFFICIENT
    return None
