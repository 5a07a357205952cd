"""The training images trainctl uses, as data (pure): the accounts AWS publishes its Deep Learning Containers
from, per region, and the images chosen per accelerator. `backends/sagemaker/images.py` builds the URIs; the
permissions boundary (iam/boundary.py) lets job roles pull from these accounts and the caller's own only.
"""
from __future__ import annotations

from dataclasses import dataclass

DLC_ACCOUNT = "763104351884"
# Regions whose DLC images are published from another account (AWS DLC available_images.md; the five newest
# from the SageMaker Python SDK's image_uri_config/pytorch.json, training 2.5.1-2.8.0, @ a2481266 2026-08-21).
DLC_ACCOUNTS = {
    "ap-east-2": "975050140332", "ap-southeast-5": "550225433462", "ap-southeast-6": "633930458069",
    "ap-southeast-7": "590183813437", "mx-central-1": "637423239942",
    "af-south-1": "626614931356", "ap-east-1": "871362719292", "ap-south-2": "772153158452",
    "ap-southeast-3": "907027046896", "ap-southeast-4": "457447274322", "eu-central-2": "380420809688",
    "eu-south-1": "692866216735", "eu-south-2": "503227376785", "me-south-1": "217643126080",
    "me-central-1": "914824155844", "il-central-1": "780543022126", "ca-west-1": "204538143572",
    "ap-northeast-3": "364406365360",
    # other partitions publish from their own accounts (aws-cn, aws-us-gov)
    "cn-north-1": "727897471807", "cn-northwest-1": "727897471807",
    "us-gov-west-1": "442386744353", "us-gov-east-1": "446045086412",
}
# accelerator kind -> (repository, tag). PyTorch 2.10: aws/deep-learning-containers
# pytorch/training/buildspec-2-10-sm.yml @ 37214bda (tags <version>-<device>-py313[-cu130]-ubuntu22.04-sagemaker).
IMAGES = {
    "gpu": ("pytorch-training", "2.10.0-gpu-py313-cu130-ubuntu22.04-sagemaker"),
    "neuron": ("pytorch-training-neuronx", "2.1.2-neuronx-py310-sdk2.20.2-ubuntu20.04"),
    # CPU-only instance types (ml.c5, ml.m5): the same framework build without CUDA
    "cpu": ("pytorch-training", "2.10.0-cpu-py313-ubuntu22.04-sagemaker"),
}


@dataclass(frozen=True)
class Support:
    """How long AWS patches an image trainctl chooses: one row per image, easy to update, each with its source."""

    image: str          # what trainctl sends: repository:tag (SageMaker) or the DLAMI's SSM parameter (EC2)
    framework: str
    end_of_patch: str   # ISO date; "" when AWS publishes none (then trainctl says so)
    source: str


SUPPORT = (
    Support("pytorch-training:2.10.0-gpu-py313-cu130-ubuntu22.04-sagemaker", "PyTorch 2.10", "2027-01-21",
            "AWS DLC Framework Support Policy (aws.github.io/deep-learning-containers/reference/support_policy): "
            "PyTorch 2.10 GA 2026-01-21, EOP 2027-01-21"),
    Support("pytorch-training:2.10.0-cpu-py313-ubuntu22.04-sagemaker", "PyTorch 2.10", "2027-01-21",
            "AWS DLC Framework Support Policy: PyTorch 2.10 EOP 2027-01-21"),
    Support("smdistributed-modelparallel:2.5.1-gpu-py311-cu124", "PyTorch 2.5.1 with SMP 2.8.0", "",
            "SageMaker Developer Guide, SMP v2 release notes: no end of support published"),
    Support("pytorch-training-neuronx:2.1.2-neuronx-py310-sdk2.20.2-ubuntu20.04", "PyTorch 2.1.2 (Neuron SDK 2.20)",
            "", "Neuron release notes: Neuron SDK 2.20 (2024) superseded, no end date published; not yet replaced"),
    Support("/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.7-ubuntu-22.04/latest/ami-id",
            "PyTorch 2.7 (GPU DLAMI)", "2026-04-23", "DLAMI Support Policy table: PyTorch 2.7.0 end of patch 2026-04-23"),
    Support("/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id", "Neuron DLAMI (Ubuntu 22.04)",
            "", "Neuron release notes: Ubuntu 22.04 DLAMIs no longer published from Neuron 2.30; no end date"),
)


def support_of(image: str) -> Support | None:
    """The support row of an image URI or SSM parameter (matched on its repository:tag or parameter)."""
    return next((row for row in SUPPORT if image.endswith(row.image) or row.image in image), None)


def support_note(image: str, today: str) -> tuple[str, bool]:
    """(what to say about the image's support, whether it is past its end of patch); `today`: ISO date."""
    row = support_of(image)
    if row is None:
        return f"{image}: not in trainctl's image table, its support is yours to check", False
    if not row.end_of_patch:
        return f"{row.framework}: AWS publishes no end of patch for it (catalog/images.py)", False
    if today > row.end_of_patch:
        return (f"warning: {row.framework} is past its end of patch ({row.end_of_patch}); --image/--ami give "
                "another"), True
    return f"{row.framework}: patched by AWS until {row.end_of_patch}", False


# SageMaker's model parallelism library v2 ships only in its own images (SageMaker Developer Guide, "SMP v2
# supported frameworks"; SDK image_uri_config/pytorch-smp.json: repository smdistributed-modelparallel, one
# account in 17 regions, version_aliases PyTorch 2.5.1 -> SMP 2.8.0; image_uris.py: tag
# "<pytorch>-gpu-py311-cu124" for PyTorch 2.5).
SMP_ACCOUNT = "658645717510"
SMP_REGIONS = ("ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-south-1", "ap-southeast-1",
               "ap-southeast-2", "ca-central-1", "eu-central-1", "eu-north-1", "eu-west-1", "eu-west-2", "eu-west-3",
               "sa-east-1", "us-east-1", "us-east-2", "us-west-1", "us-west-2")
SMP_IMAGE = ("smdistributed-modelparallel", "2.5.1-gpu-py311-cu124")


def image_accounts() -> tuple[str, ...]:
    """Every account trainctl's images come from (the boundary's ECR scope)."""
    return tuple(sorted({DLC_ACCOUNT, SMP_ACCOUNT, *DLC_ACCOUNTS.values()}))


def support_today(image: str) -> str:
    """The launch's note on the image it uses: patched until when, or a warning once it is past."""
    import datetime

    return support_note(image, datetime.date.today().isoformat())[0]
