"""trainctl's own table of SageMaker training images (the SDK's lookup knows no current neuronx image).

AWS Deep Learning Containers live in account 763104351884 in most regions; a few opt-in regions
have their own account. Versions are pinned so a job is reproducible; `--image` overrides.
"""
from __future__ import annotations

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
# accelerator kind -> (repository, tag)
IMAGES = {
    "gpu": ("pytorch-training", "2.5.1-gpu-py311-cu124-ubuntu22.04-sagemaker"),
    "neuron": ("pytorch-training-neuronx", "2.1.2-neuronx-py310-sdk2.20.2-ubuntu20.04"),
    # CPU-only instance types (ml.c5, ml.m5): the same framework build without CUDA
    "cpu": ("pytorch-training", "2.5.1-cpu-py311-ubuntu22.04-sagemaker"),
}


def training_image(region: str, accelerator_kind: str) -> str:
    """accelerator_kind: the catalog's kind ("gpu" | "neuron"), or "cpu"."""
    if accelerator_kind not in IMAGES:
        raise ValueError(f"no training image for accelerator kind {accelerator_kind!r}")
    repo, tag = IMAGES[accelerator_kind]
    account = DLC_ACCOUNTS.get(region, DLC_ACCOUNT)
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{account}.dkr.ecr.{region}.{domain}/{repo}:{tag}"


# SageMaker's model parallelism library v2 ships only in its own images (SageMaker Developer Guide, "SMP v2
# supported frameworks"; SDK image_uri_config/pytorch-smp.json: repository smdistributed-modelparallel, one
# account in 17 regions, version_aliases PyTorch 2.5.1 -> SMP 2.8.0; image_uris.py: tag
# "<pytorch>-gpu-py311-cu124" for PyTorch 2.5).
SMP_ACCOUNT = "658645717510"
SMP_REGIONS = ("ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-south-1", "ap-southeast-1",
               "ap-southeast-2", "ca-central-1", "eu-central-1", "eu-north-1", "eu-west-1", "eu-west-2", "eu-west-3",
               "sa-east-1", "us-east-1", "us-east-2", "us-west-1", "us-west-2")
SMP_IMAGE = ("smdistributed-modelparallel", "2.5.1-gpu-py311-cu124")


def smp_image(region: str) -> str:
    """The SMP v2 training image (PyTorch 2.5.1 with SMP 2.8.0) in `region`; one line where it is not published."""
    if region not in SMP_REGIONS:
        from trainctl.errors import UsageError

        raise UsageError(f"--distribution smp: SageMaker publishes its model parallelism images in "
                         f"{', '.join(SMP_REGIONS)} only, not {region}; choose one of those (--region) or "
                         "--distribution torch_distributed")
    repo, tag = SMP_IMAGE
    return f"{SMP_ACCOUNT}.dkr.ecr.{region}.amazonaws.com/{repo}:{tag}"
