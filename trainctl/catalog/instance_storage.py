"""Each catalog type's NVMe instance storage, GB (pure data): EC2 DescribeInstanceTypes
`InstanceStorageInfo.TotalSizeInGB` (AWS's answers as recorded in the sandbox's instance-type data, read 2026-11-28,
checked against the EC2 User Guide,
"Instance store volume limits": the same figures). 0: EBS only (p3: "EBS-only").

SageMaker uses it in place of an EBS volume: "When using an ML instance with NVMe SSD volumes, SageMaker doesn't
provision Amazon EBS gp2 storage. Available storage is fixed to the NVMe-type instance's storage capacity"
(botocore `sagemaker` ResourceConfig.VolumeSizeInGB).
"""
from __future__ import annotations

INSTANCE_STORAGE_GB = {
    "g5.xlarge": 250, "g5.2xlarge": 450, "g5.4xlarge": 600, "g5.8xlarge": 900, "g5.12xlarge": 3800,
    "g5.16xlarge": 1900, "g5.24xlarge": 3800, "g5.48xlarge": 7600,
    "g6.xlarge": 250, "g6.2xlarge": 450, "g6.4xlarge": 600, "g6.8xlarge": 900, "g6.12xlarge": 3760,
    "g6.16xlarge": 1880, "g6.24xlarge": 3760, "g6.48xlarge": 7520,
    "p3.2xlarge": 0, "p3.8xlarge": 0, "p3.16xlarge": 0, "p3dn.24xlarge": 1800,
    "p4d.24xlarge": 8000, "p5.48xlarge": 30400,
    "trn1.2xlarge": 474, "trn1.32xlarge": 7600, "trn1n.32xlarge": 7600,
}


def instance_storage_gb(instance_type: str) -> int | None:
    """GB of NVMe instance storage; 0 for EBS-only types; None for a type not in the table."""
    return INSTANCE_STORAGE_GB.get(instance_type)
