"""What a fresh sandbox account holds, created at start and again after every admin reset.

- in each seeded region: the default VPC with a default subnet in every AZ (moto makes it when
  the region's EC2 backend is created), the job bucket `trainctl-{account}-{region}`, the AWS Deep
  Learning AMIs (GPU PyTorch, GPU base, Neuron) and the public SSM parameters that name them;
- the SageMaker execution role `trainctl-sagemaker-execution`, trusted by sagemaker.amazonaws.com;
- the managed policy `trainctl-boundary` (trainctl's permissions boundary for the roles it creates).

Seeding calls moto's backends directly (no HTTP, no boto3): it runs before the server serves.
It is split in two because importing moto's EC2 takes about a second: `seed_core` runs before
serving, `seed_ec2` in the background warm-up (EC2 and SSM calls wait for it).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone

from trainctl_sandbox.server.context import SandboxContext

EXECUTION_ROLE = "trainctl-sagemaker-execution"
DLAMI_OWNER = "898082745236"  # the account AWS publishes its Deep Learning AMIs from
TRUST_POLICY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
ROLE_POLICY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:ListBucket", "s3:DeleteObject"],
     "Resource": ["arn:aws:s3:::trainctl-*", "arn:aws:s3:::trainctl-*/*"]},
    {"Effect": "Allow", "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents",
                                   "logs:DescribeLogStreams", "cloudwatch:PutMetricData",
                                   "ecr:GetAuthorizationToken", "ecr:BatchGetImage",
                                   "ecr:GetDownloadUrlForLayer", "ec2:CreateNetworkInterface",
                                   "ec2:DescribeNetworkInterfaces", "ec2:DeleteNetworkInterface",
                                   "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeVpcs"],
     "Resource": "*"}]}


# The families each image's release notes list as supported (AWS DLAMI release notes, "supported_ec2_instances"):
# the OSS-driver GPU DLAMIs (NVIDIA's open kernel modules: Turing and newer) list no P3 and no G3; the Base
# Proprietary Nvidia Driver AMI (Amazon Linux 2) 73.1 (2026-06-05) lists G3, P4d, Inf1 only; the Neuron DLAMIs
# drive Trainium and Inferentia2. A node booted from an image that does not list its family sees no accelerator
# (ec2/machines.py).
OSS_GPU = ("g4dn", "g5", "g6", "gr6", "g6e", "g6f", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200")
NEURON = ("trn1", "trn1n", "trn2", "inf2")


@dataclass(frozen=True)
class Dlami:
    key: str
    name: str
    description: str
    parameter: str   # AWS's public SSM parameter naming of the latest image ("": none seeded)
    families: tuple[str, ...] = OSS_GPU
    # DescribeImages' RootDeviceName: "/dev/sda1 or /dev/xvda, differs by AMI" (EC2 User Guide, device names):
    # Amazon Linux images boot from /dev/xvda, Ubuntu ones from /dev/sda1
    root_device: str = "/dev/sda1"


# Parameter names follow AWS's scheme: /aws/service/deeplearning/ami/<arch>/<ami type>/latest/ami-id
# (DLAMI guide, "Finding the ID of a DLAMI") and /aws/service/neuron/dlami/<flavour>/<os>/latest/image_id
# (Neuron DLAMI guide, "SSM parameters").
DLAMIS = (
    Dlami("gpu-pytorch-2.7", "Deep Learning OSS Nvidia Driver AMI GPU PyTorch 2.7 (Ubuntu 22.04) 20251101",
          "PyTorch 2.7, NVIDIA driver, CUDA 12.8, EFA",
          "/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.7-ubuntu-22.04/latest/ami-id"),
    Dlami("gpu-pytorch-2.9", "Deep Learning OSS Nvidia Driver AMI GPU PyTorch 2.9 (Ubuntu 24.04) 20251101",
          "PyTorch 2.9, NVIDIA driver, CUDA 13.0, EFA",
          "/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.9-ubuntu-24.04/latest/ami-id"),
    Dlami("gpu-pytorch-2.10-al2023", "Deep Learning OSS Nvidia Driver AMI GPU PyTorch 2.10 (Amazon Linux 2023) 20260418",
          "PyTorch 2.10, NVIDIA driver, EFA",
          "/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.10-amazon-linux-2023/latest/ami-id",
          root_device="/dev/xvda"),
    Dlami("gpu-base", "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) 20251101",
          "NVIDIA driver, CUDA, EFA; no framework",
          "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"),
    Dlami("neuron", "Deep Learning AMI Neuron (Ubuntu 22.04) 20251101",
          "Neuron SDK with PyTorch (torch-neuronx) and JAX virtual environments",
          "/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id", families=NEURON),
    Dlami("neuron-pytorch-2.9", "Deep Learning AMI Neuron PyTorch 2.9 (Ubuntu 24.04) 20251101",
          "Neuron SDK, PyTorch 2.9 (torch-neuronx)",
          "/aws/service/neuron/dlami/pytorch-2.9/ubuntu-24.04/latest/image_id", families=NEURON),
    Dlami("gpu-base-proprietary-al2", "Deep Learning Base Proprietary Nvidia Driver AMI (Amazon Linux 2) Version 73.1",
          "Proprietary NVIDIA driver 570, CUDA 12.1-12.3, EFA",
          "",  # seeded without an SSM parameter (its real name is not in our sources): launched by id, --ami
          families=("g3", "p4d", "inf1"), root_device="/dev/xvda"),
)
GPU_PYTORCH_PARAMETER = DLAMIS[0].parameter
NEURON_PARAMETER = DLAMIS[4].parameter
_RELEASED = datetime(2025, 11, 1, tzinfo=timezone.utc)


def bucket_name(account: str, region: str) -> str:
    return f"trainctl-{account}-{region}"


def ami_id(region: str, key: str) -> str:
    """AMI ids differ per region on AWS too; these are stable, so a test may compute them."""
    return "ami-0" + hashlib.blake2b(f"{region}/{key}".encode(), digest_size=8).hexdigest()


def seed_core(ctx: SandboxContext) -> None:
    from moto.iam.models import iam_backends
    from moto.s3.models import s3_backends

    s3 = s3_backends[ctx.account_id]["aws"]
    for region in ctx.regions:
        s3.create_bucket(bucket_name(ctx.account_id, region), region)
    iam = iam_backends[ctx.account_id]["global"]
    iam.create_role(role_name=EXECUTION_ROLE, assume_role_policy_document=json.dumps(TRUST_POLICY), path="/",
                    permissions_boundary=None, description="SageMaker training jobs launched by trainctl",
                    tags=[], max_session_duration="3600")
    iam.put_role_policy(EXECUTION_ROLE, "trainctl-training-access", json.dumps(ROLE_POLICY))
    # What an administrator creates once per account: the permissions boundary of every role trainctl creates
    from trainctl.iam import BOUNDARY_POLICY
    from trainctl.iam.boundary import boundary_policy

    iam.create_policy(description="trainctl: the most any role trainctl creates may do", path="/",
                      policy_document=json.dumps(boundary_policy()), policy_name=BOUNDARY_POLICY, tags=[])


def _default_vpc_internet(ec2) -> None:
    """AWS's default VPC has an internet gateway and a main route table with 0.0.0.0/0 to it (public subnets,
    no NAT: VPC User Guide, "Default VPCs"); moto's has neither."""
    attached = {igw.vpc.id for igw in ec2.internet_gateways.values() if getattr(igw, "vpc", None) is not None}
    for vpc in [v for v in ec2.vpcs.values() if v.is_default and v.id not in attached]:  # a kept account has it
        igw = ec2.create_internet_gateway()
        ec2.attach_internet_gateway(igw.id, vpc.id)
        for table in [t for t in ec2.route_tables.values() if t.vpc_id == vpc.id and t.main_association_id]:
            ec2.create_route(table.id, "0.0.0.0/0", gateway_id=igw.id)


def seed_ec2(ctx: SandboxContext) -> None:
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.amis import Ami
    from moto.ssm.models import Parameter, ssm_backends

    for region in ctx.regions:
        ec2 = ec2_backends[ctx.account_id][region]  # creating it creates the default VPC and subnets
        _default_vpc_internet(ec2)
        params = ssm_backends[ctx.account_id][region]._parameters
        for d in DLAMIS:
            image = ami_id(region, d.key)
            ec2.amis[image] = Ami(ec2, image, name=d.name, description=d.description, owner_id=DLAMI_OWNER,
                                  owner_alias="amazon", public=True, virtualization_type="hvm",
                                  architecture="x86_64", root_device_type="ebs", root_device_name=d.root_device,
                                  creation_date=_RELEASED, region_name=f"{region}a", boot_mode="uefi-preferred",
                                  image_location=f"amazon/{d.name}")
            if not d.parameter:
                continue
            params[d.parameter].append(Parameter(
                account_id=ctx.account_id, name=d.parameter, value=image, parameter_type="String",
                description=None, allowed_pattern=None, keyid=None, last_modified_date=_RELEASED, version=1,
                data_type="aws:ec2:image"))
