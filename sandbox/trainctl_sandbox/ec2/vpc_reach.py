"""What a host without a public IPv4 reaches from its subnet, read from the EC2 state as AWS routes it, and the
failures AWS gives a job whose hosts cannot reach what they need.

- A SageMaker training job in VPC mode has no internet access, in the default VPC too (SageMaker Developer
  Guide, "Give SageMaker training jobs access to resources in your Amazon VPC"): the training toolkit's S3
  download of `sagemaker_submit_directory` needs an S3 gateway endpoint on the subnet's route table or a
  default route to a NAT gateway; its `pip install -r requirements.txt` needs a NAT (toolkit `modules.py`,
  `InstallRequirementsError`, message format of `errors._CalledProcessError`).
- EFA traffic needs a security group that allows all traffic out to itself as well as in from itself (EC2
  User Guide, "Get started with EFA", security group step; the SageMaker VPC guide's EFA note): SageMaker
  runs EFA on the types of the toolkit's `SM_EFA_NCCL_INSTANCES`; without the rule NCCL cannot connect and
  the job fails at its first collective.
- An EC2 instance launched with several network interfaces gets no public IPv4 (EC2 User Guide,
  "using-instance-addressing"); its agent reaches S3, EC2 and CloudWatch Logs only through a NAT or the VPC
  endpoints of those services (interface endpoints with private DNS).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

# aws/sagemaker-training-toolkit src/sagemaker_training/__init__.py, SM_EFA_NCCL_INSTANCES
SAGEMAKER_EFA_TYPES = frozenset({"ml.g4dn.8xlarge", "ml.g4dn.12xlarge", "ml.g5.48xlarge", "ml.p3dn.24xlarge",
                                 "ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.trn1.32xlarge"})
AGENT_SERVICES = ("s3", "ec2", "logs")  # what trainctl's EC2 node agent calls


@dataclass(frozen=True)
class Reach:
    nat: bool               # a default route through a NAT gateway (the internet, so every AWS endpoint)
    internet_gateway: bool  # a default route to an internet gateway (useful only with a public IPv4)
    s3_gateway: bool        # an S3 gateway endpoint on the subnet's route table
    interfaces: frozenset[str]

    def reaches(self, service: str, public_ip: bool = False) -> bool:
        if self.nat or (public_ip and self.internet_gateway):
            return True
        return self.s3_gateway if service == "s3" else service in self.interfaces


def _backend(account: str, region: str) -> Any:
    from moto.ec2.models import ec2_backends

    return ec2_backends[account][region]


def _route_table(ec2: Any, subnet: Any) -> Any:
    tables = [t for t in ec2.route_tables.values() if t.vpc_id == subnet.vpc_id]
    own = [t for t in tables if any(a.get("SubnetId") == subnet.id for a in t.associations)]
    return (own or [t for t in tables if t.main_association_id])[0] if (own or tables) else None


def reach(account: str, region: str, subnet_id: str) -> Reach:
    ec2 = _backend(account, region)
    subnet = ec2.get_subnet(subnet_id)
    table = _route_table(ec2, subnet)
    default = [r for r in (table.routes if table else []) if r.destination_cidr_block == "0.0.0.0/0"]
    endpoints = [e for e in ec2.vpc_end_points.values() if e.vpc_id == subnet.vpc_id and e.state == "available"]
    prefix = f"com.amazonaws.{region}."
    return Reach(
        nat=any(r.nat_gateway is not None for r in default),
        internet_gateway=any(str(getattr(r.gateway, "id", r.gateway) or "").startswith("igw-") for r in default),
        s3_gateway=any(e.service_name == f"{prefix}s3" and (e.vpc_endpoint_type or "Gateway").lower() == "gateway"
                       and table is not None and table.id in (e.route_table_ids or []) for e in endpoints),
        interfaces=frozenset(e.service_name.removeprefix(prefix) for e in endpoints
                             if (e.vpc_endpoint_type or "").lower() == "interface" and e.private_dns_enabled))


def egress_to_itself(account: str, region: str, group_ids: list[str]) -> bool:
    """Whether one of the groups lets all traffic out to itself (a rule naming the group as destination)."""
    ec2 = _backend(account, region)
    for gid in group_ids:
        group = ec2.get_security_group_from_id(gid)
        if group is not None and any(r.ip_protocol == "-1" and r.source_group.get("GroupId") == gid
                                     for r in group.egress_rules):
            return True
    return False


def sagemaker_failure(account: str, region: str, request: dict[str, Any], code: Path) -> str | None:
    """The FailureReason SageMaker gives a VPC-mode job that cannot download its code, install its requirements
    or connect its EFA hosts; None when it can."""
    vpc = request.get("VpcConfig")
    if not vpc:
        return None  # SageMaker's own network: S3 and the internet
    route = reach(account, region, vpc["Subnets"][0])
    submit = str((request.get("HyperParameters") or {}).get("sagemaker_submit_directory", "")).strip('"')
    bucket, _, key = submit.removeprefix("s3://").partition("/")
    if not route.reaches("s3"):
        return ("AlgorithmError: framework error: botocore.exceptions.ConnectTimeoutError: Connect timeout on "
                f'endpoint URL: "https://{bucket}.s3.{region}.amazonaws.com/{key}" (the job\'s VPC subnet reaches '
                "S3 through neither a gateway endpoint nor a NAT)")
    secret = _unreachable_secret(route, region, request.get("Environment") or {})
    if secret:
        return secret
    requirements = code / "requirements.txt"
    if requirements.is_file() and not route.nat:
        first = next((ln.strip() for ln in requirements.read_text().splitlines()
                      if ln.strip() and not ln.lstrip().startswith("#")), "")
        return ("AlgorithmError: InstallRequirementsError:\nExitCode 1\nErrorMessage \"ERROR: Could not find a "
                f"version that satisfies the requirement {first} (from versions: none)\"\n"
                "Command \"/opt/conda/bin/python3 -m pip install -r requirements.txt\"")
    resource = request.get("ResourceConfig") or {}
    if (resource.get("InstanceType") in SAGEMAKER_EFA_TYPES and int(resource.get("InstanceCount", 1)) > 1
            and not egress_to_itself(account, region, list(vpc.get("SecurityGroupIds") or []))):
        return ("AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"torch.distributed."
                "DistBackendError: NCCL error: remote process exited or there was a network error, NCCL version "
                "2.x; NET/OFI Couldn't connect to the peer (the security group allows no outbound traffic to "
                "itself, which EFA needs)\"")
    return None


def _unreachable_secret(route: Reach, region: str, environment: dict[str, str]) -> str | None:
    """trainctl's container reads the ARNs of TRAINCTL_SECRET_ARN_* at start (entrypoints/trainctl_secrets.py) from SSM
    or Secrets Manager: without a NAT, only through those services' interface endpoints."""
    for name, value in sorted(environment.items()):
        service = next((s for s in ("ssm", "secretsmanager") if f":{s}:" in str(value)), None)
        if name.startswith("TRAINCTL_SECRET_") and service and not route.reaches(service):
            return ("AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"botocore.exceptions."
                    f"ConnectTimeoutError: Connect timeout on endpoint URL: \"https://{service}.{region}.amazonaws.com/"
                    f"\"\" (reading secret {name.removeprefix('TRAINCTL_SECRET_ARN_')}: the job's VPC subnet reaches "
                    f"{service} through neither an interface endpoint nor a NAT)")
    return None
