"""The training images trainctl uses, as data (pure): the accounts AWS publishes its Deep Learning Containers
from, per region, and the images chosen per accelerator. `backends/sagemaker/images.py` builds the URIs; the
permissions boundary (iam/boundary.py) lets job roles pull from these accounts and the caller's own only.
"""
from __future__ import annotations

from dataclasses import dataclass

from trainctl.catalog.platforms import NAMES, facts

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
    # AWS DLC available images (aws.github.io/deep-learning-containers, reference/available_images, read 2026-07-20):
    # the newest PyTorch Training NeuronX tag, PyTorch 2.9 with Neuron SDK 2.30 on Ubuntu 24.04
    "neuron": ("pytorch-training-neuronx", "2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04"),
    # CPU-only instance types (ml.c5, ml.m5): the same framework build without CUDA
    "cpu": ("pytorch-training", "2.10.0-cpu-py313-ubuntu22.04-sagemaker"),
}


# EC2 nodes boot the Deep Learning AMI named by AWS's public SSM parameter, resolved at launch (never a pinned AMI
# id): DLAMI guide, "Finding the ID of a DLAMI" (/aws/service/deeplearning/ami/<arch>/<ami type>/latest/ami-id) and
# the Neuron DLAMI guide, "SSM parameters" (/aws/service/neuron/dlami/<flavour>/<os>/latest/image_id).
DLAMI_PARAMETERS = {
    "gpu": "/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.10-amazon-linux-2023/latest/ami-id",
    "neuron": "/aws/service/neuron/dlami/pytorch-2.9/ubuntu-24.04/latest/image_id",
}


# The NVIDIA architecture of each GPU in catalog.json, as compute capability (NVIDIA, "CUDA GPUs - Compute
# Capability"): V100 7.0 (Volta), A10G 8.6 and A100 8.0 (Ampere), L4 8.9 (Ada Lovelace), H100 9.0 (Hopper).
COMPUTE_CAPABILITY = {"V100": 7.0, "A10G": 8.6, "A100": 8.0, "L4": 8.9, "H100": 9.0}
GENERATION = {7.0: "Volta", 7.5: "Turing", 8.0: "Ampere", 8.6: "Ampere", 8.9: "Ada Lovelace", 9.0: "Hopper"}
# CUDA 13.0 Toolkit Release Notes, "Deprecated Architectures": offline compilation and library support for Maxwell,
# Pascal and Volta (sm_50 to sm_72) is dropped; Turing (sm_75) is the oldest a CUDA 13 build runs on.
CUDA13_MIN_CC = 7.5


@dataclass(frozen=True)
class Support:
    """What AWS publishes about an image trainctl chooses: one row per image, easy to update, each with its source.
    The planner reads `families`, `accelerator` and `min_compute_capability` to pair a layout only with an image
    that can drive it (`drives`); EC2's launch reads the real root device from DescribeImages, `root_device` is
    what the image is published with."""

    image: str          # what trainctl sends: repository:tag (SageMaker) or the DLAMI's SSM parameter (EC2)
    framework: str
    end_of_patch: str   # ISO date; "" when AWS publishes none (then trainctl says so)
    source: str
    accelerator: str = ""              # "gpu", "neuron", "cpu"; "" for rows kept only for their support line
    families: tuple[str, ...] = ()     # instance families the image's release notes list; () = no list published
    min_compute_capability: float = 0.0  # GPU images: the oldest NVIDIA architecture their CUDA build runs on
    os: str = ""
    driver: str = ""                   # NVIDIA driver on a DLAMI; "SageMaker's host" for a container
    toolkit: str = ""                  # CUDA or Neuron SDK version
    root_device: str = ""              # EC2 images: the RootDeviceName they are published with


_DLC_SOURCE = ("AWS DLC Framework Support Policy (aws.github.io/deep-learning-containers/reference/support_policy): "
               "PyTorch 2.10 GA 2026-01-21, EOP 2027-01-21; aws/deep-learning-containers buildspec-2-10-sm.yml: "
               "cu130, Ubuntu 22.04; CUDA 13.0 Release Notes: no Volta (sm_70)")
SUPPORT = (
    Support("pytorch-training:2.10.0-gpu-py313-cu130-ubuntu22.04-sagemaker", "PyTorch 2.10", "2027-01-21",
            _DLC_SOURCE, accelerator="gpu", min_compute_capability=CUDA13_MIN_CC, os="Ubuntu 22.04",
            driver="SageMaker's host", toolkit="CUDA 13.0"),
    Support("pytorch-training:2.10.0-cpu-py313-ubuntu22.04-sagemaker", "PyTorch 2.10", "2027-01-21",
            "AWS DLC Framework Support Policy: PyTorch 2.10 EOP 2027-01-21", accelerator="cpu", os="Ubuntu 22.04"),
    Support("smdistributed-modelparallel:2.5.1-gpu-py311-cu124", "PyTorch 2.5.1 with SMP 2.8.0", "",
            "SageMaker Developer Guide, SMP v2 release notes: no end of support published; SMP v2 supported "
            "instance types: ml.p4d.24xlarge, ml.p4de.24xlarge, ml.p5.48xlarge", accelerator="gpu",
            families=("p4d", "p4de", "p5"), min_compute_capability=8.0, os="Ubuntu 20.04",
            driver="SageMaker's host", toolkit="CUDA 12.4"),
    Support("pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04", "PyTorch 2.9 (Neuron SDK 2.30)",
            "", "AWS DLC available images (PyTorch Training NeuronX, newest tag); Neuron publishes no end of patch",
            accelerator="neuron", families=("trn1", "trn1n", "trn2"), os="Ubuntu 24.04",
            driver="SageMaker's host", toolkit="Neuron SDK 2.30"),
    Support(DLAMI_PARAMETERS["gpu"], "PyTorch 2.10 (GPU DLAMI, Amazon Linux 2023)", "2027-01-21",
            "DLAMI release notes: Deep Learning OSS Nvidia Driver AMI GPU PyTorch 2.10 (Amazon Linux 2023) 20260919, "
            "x86_64, supported_ec2_instances G4dn, G5, G6, Gr6, Gr6f, G6e, G6f, P4, P4de, P5, P5e, P5en, P6-B200 "
            "(no P3: NVIDIA's open kernel modules need Turing or newer), nvidia_driver 595.91.07; DLAMI Support "
            "Policy: end of patch one year after the framework's GA (PyTorch 2.10 GA 2026-01-21); EC2 User Guide, "
            "device names: the root is /dev/sda1 or /dev/xvda by AMI (Amazon Linux: /dev/xvda)",
            accelerator="gpu", families=("g4dn", "g5", "g6", "gr6", "g6e", "g6f", "p4d", "p4de", "p5", "p5e",
                                         "p5en", "p6-b200"),
            min_compute_capability=CUDA13_MIN_CC, os="Amazon Linux 2023", driver="595.91.07 (open kernel modules)",
            toolkit="CUDA 13.0", root_device="/dev/xvda"),
    # The current image for the bundled Neuron script (torch_xla): no newer one can run it. Neuron 2.30 ended
    # PyTorch/XLA for training ("PyTorch 2.9 was the last version based on the PyTorch/XLA backend"); from 2.32 no
    # Neuron DLAMI pre-installs torch-neuronx ("use one associated with SDK 2.31.0 or earlier"), and the 2.33
    # TorchNeuron 2.14 DLAMI is the native backend (device "neuron", not XLA) on Trn2/Trn3 only. The SSM prefix's
    # `latest` stays the SDK 2.31 build; the XLA torch-neuronx is in maintenance (fixes and security patches).
    Support(DLAMI_PARAMETERS["neuron"], "PyTorch 2.9 (Neuron DLAMI, Ubuntu 24.04)", "",
            "Neuron DLAMI guide (SSM prefix /aws/service/neuron/dlami/pytorch-2.9/ubuntu-24.04); Neuron update-dlami "
            "page 2.32 (\"Starting with Neuron SDK 2.32.0, PyTorch (torch-neuronx) is no longer pre-installed on "
            "Neuron DLAMIs ... use one associated with SDK 2.31.0 or earlier\") and 2.33 (PyTorch 2.9 (PyTorch/XLA) "
            "DLAMIs no longer published after Neuron 2.31; the TorchNeuron 2.14 DLAMI is the native backend on "
            "Trn2/Trn3 only); Neuron announcement \"Neuron no longer supports PyTorch/XLA for training starting with "
            "Neuron 2.30\"; PyTorch Support on Neuron: torch-neuronx (XLA) in maintenance status as of 2.32, not end "
            "of support; no end date published",
            accelerator="neuron", families=("trn1", "trn1n", "trn2", "inf2"), os="Ubuntu 24.04",
            driver="aws-neuronx-dkms", toolkit="Neuron SDK 2.31 (the last with PyTorch/XLA)", root_device="/dev/sda1"),
    # kept so a job launched before the change still gets its support line (and its warning)
    Support("/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.7-ubuntu-22.04/latest/ami-id",
            "PyTorch 2.7 (GPU DLAMI)", "2026-04-23", "DLAMI Support Policy table: PyTorch 2.7.0 end of patch 2026-04-23"),
)
# Why no image trainctl could choose drives Volta (p3, p3dn) any more, on either platform: the only PyTorch builds
# AWS still patches are CUDA 13 (no sm_70); the last DLAMI that listed P3, the Base Proprietary Nvidia Driver AMI
# (Amazon Linux 2), dropped it (version 73.1 of 2026-06-05 lists G3, P4d, Inf1) as Amazon Linux 2 reached its end
# of patch (2026-06-30, DLAMI Support Policy table); PyTorch 2.8 (CUDA 12.9) DLC and DLAMI ended patches 2026-08-06.
VOLTA_NOTE = ("AWS patches no PyTorch image for Volta now (the last P3 DLAMI, on Amazon Linux 2, ended 2026-06-30; "
              "PyTorch 2.8, CUDA 12.9, ended 2026-08-06)")


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


def chosen_image(platform: str, accelerator_kind: str) -> str:
    """What a launch uses unless --image/--ami say otherwise: SageMaker's repository:tag, EC2's DLAMI parameter."""
    if facts(platform).boots == "dlami":
        return DLAMI_PARAMETERS["neuron" if accelerator_kind == "neuron" else "gpu"]
    return ":".join(IMAGES.get(accelerator_kind, IMAGES["cpu"]))


def support_rows(today: str) -> list[dict]:
    """`trainctl catalog`'s image table: each image trainctl chooses, until when AWS patches it, and the source."""
    chosen: dict[str, tuple[str, str]] = {}
    for platform, kind in [(p, k) for p in NAMES for k in ("gpu", "neuron", "cpu")]:
        chosen.setdefault(chosen_image(platform, kind), (platform, kind))   # EC2's CPU types boot the GPU DLAMI
    chosen[":".join(SMP_IMAGE)] = ("sagemaker", "gpu (--distribution smp)")
    rows = []
    for image, (platform, kind) in chosen.items():
        row = support_of(image)
        rows.append({"platform": platform, "accelerator": kind, "image": image,
                     "framework": row.framework if row else None, "end_of_patch": row.end_of_patch if row else None,
                     "status": support_note(image, today)[0], "source": row.source if row else None,
                     # what it drives and runs on (the planner's `drives`), as its source says
                     "families": list(row.families) if row else None, "os": row.os if row else None,
                     "driver": row.driver if row else None, "toolkit": row.toolkit if row else None,
                     "min_compute_capability": row.min_compute_capability if row else None,
                     "root_device": (row.root_device or None) if row else None})
    return rows


def drives(platform: str, family: str, accelerator_key: str, accelerator_kind: str) -> str | None:
    """None when the image trainctl would choose for this platform and type can drive its accelerator; otherwise
    the one-line reason, for the plan's excluded layouts (--show-excluded)."""
    row = support_of(chosen_image(platform, accelerator_kind))
    if row is None or not row.accelerator:
        return None   # an image without published truth: nothing to check it against
    own = facts(platform)
    what = f"{own.title} {'image' if own.boots == 'training-image' else 'DLAMI'} {row.framework}"
    cc = COMPUTE_CAPABILITY.get(accelerator_key)
    if accelerator_kind == "gpu" and cc is not None and cc < row.min_compute_capability:
        why = f"; {VOLTA_NOTE}" if cc == 7.0 else ""
        return (f"the {what} ({row.toolkit}) cannot drive the {accelerator_key} ({GENERATION.get(cc, cc)}, compute "
                f"capability {cc:.1f} < {row.min_compute_capability:.1f}){why}")
    if row.families and family not in row.families:
        return f"the {what} does not support {family} (its release notes list {', '.join(row.families)})"
    return None


# The node agent installs a Lustre client only where the FSx for Lustre User Guide's steps need no kernel-matched
# module build (Amazon Linux 2023: `dnf install -y lustre-client`, bootstrap/fsx.py); on Ubuntu the guide's client
# must match the running kernel (lustre-client-modules-$(uname -r)), which trainctl does not install yet.
LUSTRE_CLIENT_OS = ("Amazon Linux 2023",)


def no_lustre_client(platform: str, accelerator_kind: str) -> str | None:
    """Why an EC2 job with an FSx channel cannot mount it on the image trainctl would boot, or None."""
    row = support_of(chosen_image(platform, accelerator_kind))
    if facts(platform).boots != "dlami" or row is None or not row.os or row.os in LUSTRE_CLIENT_OS:
        return None
    return (f"an FSx channel on EC2 needs a Lustre client, which the node agent installs on "
            f"{', '.join(LUSTRE_CLIENT_OS)} only; the {row.framework} runs {row.os}: use SageMaker (it mounts FSx "
            "itself), an S3 channel, or --ami with the client installed")


def plan_words(platform: str, accelerator_kind: str, today: str) -> str:
    """The plan's `why` line on the image an option would run on."""
    return "image " + support_note(chosen_image(platform, accelerator_kind), today)[0]

