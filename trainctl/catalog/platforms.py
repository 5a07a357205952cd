"""What the pure layers know of each platform, as data: one `PlatformFacts` entry per backend.

The spec's `platforms:` names, a plan's `platform`, the planner's launch overheads and Spot recovery, the CLI's
`--platform` help and the IAM table's platforms all read this registry. It lives below every layer (catalog/)
because those readers run before, or without, any backend: `trainctl schema`, an offline plan, the sandbox's
seeded policy; the pure folders may not import `trainctl/backends/` (docs/architecture.md). A backend points at
its entry (`Backend.facts`, backends/base.py) and tests/sandbox/backends/test_backend_contract.py checks that
the backends' registry and this one name the same platforms in the same order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class PlatformFacts:
    name: str                       # as the spec, plans, flags and records write it
    title: str                      # as sentences name it
    # minutes of one launch: (not billed, billed) before the first step (planner/spot/launch_overheads.py)
    start_minutes: tuple[float, float]
    # seconds between the Spot notice and the job hearing of it (planner/spot/risk.py)
    notice_poll_s: float
    # True where a Spot reclaim restarts the whole job on new capacity (SageMaker's managed Spot): no node is
    # billed while it waits, every node copies its data again, the job cannot shrink (elastic), and a
    # fallback to On-Demand moves the whole job. False where the lost nodes alone are replaced (EC2).
    restarts_whole_job: bool
    # How the planner prices and limits a layout, each one of the kinds it models (a platform that bills, limits
    # or stores otherwise needs the planner to model that kind first):
    # the On-Demand price list (AWS Price List service code; catalog.json keeps its prices under `name`)
    price_list: str
    # Spot: the EC2 Spot price history itself, or the platform's On-Demand price x (1 - EC2's Spot discount)
    spot_price: Literal["ec2-history", "ec2-discount"]
    # the Service Quota a layout draws on: vCPUs of the type's EC2 family quota (by QuotaCode, catalog.ec2_quota),
    # or instances of a quota per type named by `type_quota` (by QuotaName), in `quota_service`
    quota_service: str
    type_quota: str | None            # "{type}" and "{spot}" ("spot " or "") filled in; None: vCPUs per family
    # each node's disk: an EBS root volume holding the image (EC2), or the platform's training volume
    # (VolumeSizeInGB), replaced by the type's NVMe instance storage where it has some (SageMaker)
    disk: Literal["root-volume", "training-volume"]
    type_prefix: str                  # how the platform spells an instance type: "ml." + "g5.xlarge"
    training_types_only: bool         # offers only the catalog's types marked `sagemaker_training`
    one_type_per_job: bool            # a flexible layout is a failover across types, not one mixed fleet
    efa_types: frozenset[str] | None  # the EFA types on which NCCL gets EFA (None: every EFA type)
    streams_via_mount_s3: bool        # a streamed channel goes through mount-s3, capped to leave the gradients room
    # what a job boots (catalog/images.py): a DLC training image the platform runs, or a Deep Learning AMI on
    # which trainctl's node agent does the rest (installs the Lustre client an FSx channel needs, among others)
    boots: Literal["training-image", "dlami"]

    def quota_name(self, instance_type: str, market: str) -> str:
        """The name of the per-type quota a layout of `instance_type` draws on (`type_quota` set)."""
        return str(self.type_quota).format(type=instance_type, spot="spot " if market == "spot" else "")

    def offers(self, instance) -> bool:
        """Whether the platform offers the catalog's instance type at all."""
        return instance.sagemaker_training or not self.training_types_only


# Instance types on which SageMaker turns EFA on for NCCL (FI_PROVIDER=efa): the training toolkit's
# SM_EFA_NCCL_INSTANCES (aws/sagemaker-training-toolkit src/sagemaker_training/__init__.py: g4dn.8xlarge,
# g4dn.12xlarge, g5.48xlarge, p3dn.24xlarge, p4d.24xlarge, trn1.32xlarge) plus what the SageMaker Python SDK's
# container drivers add (aws/sagemaker-python-sdk sagemaker-train .../container_drivers/common/utils.py:
# p4de.24xlarge, p5.48xlarge). Every other type talks TCP on SageMaker, even where EC2 would use EFA
# (g5.12xlarge, trn1n.32xlarge). ../shared/reference/AWS-RULES.md records the same rule.
SAGEMAKER_EFA_TYPES = frozenset({"g4dn.8xlarge", "g4dn.12xlarge", "g5.48xlarge", "p3dn.24xlarge",
                                 "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "trn1.32xlarge"})

# The order is the registry's order (backends/__init__.py BACKENDS): the schema's enum, the spec's default
# `platforms:` and the words that name the platforms follow it.
PLATFORMS: dict[str, PlatformFacts] = {f.name: f for f in (
    # - sagemaker: Starting (provisioning the instances) ~4 min (not billed); Downloading the ~10 GB PyTorch
    #   training image and the code, then the container's start ~5 min (billed). SageMaker SIGTERMs the
    #   container itself (assumed to give the same 120 s as a stop).
    PlatformFacts("sagemaker", "SageMaker", start_minutes=(4.0, 5.0), notice_poll_s=0.0, restarts_whole_job=True,
                  price_list="AmazonSageMaker", spot_price="ec2-discount", quota_service="sagemaker",
                  type_quota="ml.{type} for {spot}training job usage", disk="training-volume", type_prefix="ml.",
                  training_types_only=True, one_type_per_job=True, efa_types=SAGEMAKER_EFA_TYPES,
                  streams_via_mount_s3=False, boots="training-image"),
    # - ec2: CreateFleet to running ~1 min (not billed); boot of the Deep Learning AMI, the agent's code
    #   download, torchrun rendezvous ~4 min (billed). The node agent polls the instance metadata for the
    #   notice every 5 s (trainctl/bootstrap/agent.py, spot_poll_s).
    PlatformFacts("ec2", "EC2", start_minutes=(1.0, 4.0), notice_poll_s=5.0, restarts_whole_job=False,
                  price_list="AmazonEC2", spot_price="ec2-history", quota_service="ec2", type_quota=None,
                  disk="root-volume", type_prefix="", training_types_only=False, one_type_per_job=False,
                  efa_types=None, streams_via_mount_s3=True, boots="dlami"),
)}
NAMES: tuple[str, ...] = tuple(PLATFORMS)


def facts(platform: str) -> PlatformFacts:
    """The entry of a platform the spec and plans already validated (a KeyError is a bug, not input)."""
    return PLATFORMS[platform]


def either(last: str = "or") -> str:
    """The platforms' names for a help text: 'sagemaker or ec2'."""
    return f" {last} ".join(NAMES) if len(NAMES) < 3 else f"{', '.join(NAMES[:-1])} {last} {NAMES[-1]}"


def every() -> str:
    """What a default of every platform is called in a help text: 'both' while there are two."""
    return "both" if len(NAMES) == 2 else "all"
