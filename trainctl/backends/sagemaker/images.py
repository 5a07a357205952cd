"""trainctl's own table of SageMaker training images (the SDK's lookup knows no current neuronx image).

AWS Deep Learning Containers live in account 763104351884 in most regions; a few opt-in regions
have their own account. Versions are pinned so a job is reproducible; `--image` overrides.
"""
from __future__ import annotations

from trainctl.catalog.images import (DLC_ACCOUNT, DLC_ACCOUNTS, IMAGES, SMP_ACCOUNT, SMP_IMAGE,  # noqa: F401
                                  SMP_REGIONS)


def training_image(region: str, accelerator_kind: str) -> str:
    """accelerator_kind: the catalog's kind ("gpu" | "neuron"), or "cpu"."""
    if accelerator_kind not in IMAGES:
        raise ValueError(f"no training image for accelerator kind {accelerator_kind!r}")
    repo, tag = IMAGES[accelerator_kind]
    account = DLC_ACCOUNTS.get(region, DLC_ACCOUNT)
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{account}.dkr.ecr.{region}.{domain}/{repo}:{tag}"


def smp_image(region: str) -> str:
    """The SMP v2 training image (PyTorch 2.5.1 with SMP 2.8.0) in `region`; one line where it is not published."""
    if region not in SMP_REGIONS:
        from trainctl.errors import UsageError

        raise UsageError(f"--distribution smp: SageMaker publishes its model parallelism images in "
                         f"{', '.join(SMP_REGIONS)} only, not {region}; choose one of those (--region) or "
                         "--distribution torch_distributed")
    repo, tag = SMP_IMAGE
    return f"{SMP_ACCOUNT}.dkr.ecr.{region}.amazonaws.com/{repo}:{tag}"
