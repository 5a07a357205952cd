"""Which subnets a job uses, the same rule for both backends and `doctor`, and what a host without a public
IPv4 reaches from a subnet (a NAT route, an S3 gateway endpoint, interface endpoints): SageMaker VPC jobs and
EC2 nodes with several network cards have no public IPv4.

The rule: the subnets given (`--subnet a,b`, all in one VPC), else the default VPC's subnets; in each AZ
the subnet with the most free addresses first (then by id), so the choice is deterministic. A job goes to
the plan's AZ (the best placement score) when a subnet is there, else to the first AZ by name.
"""
from __future__ import annotations

from dataclasses import dataclass

from trainctl.errors import UsageError


@dataclass(frozen=True)
class JobNetwork:
    vpc_id: str
    by_az: dict[str, tuple[str, ...]]    # AZ name -> subnet ids, best first; AZs in name order
    given: bool                          # the user chose the subnets
    public_ipv4: frozenset[str] = frozenset()   # subnets that give an instance a public IPv4 (MapPublicIpOnLaunch)

    def subnet_for(self, az: str | None) -> tuple[str, str, str]:
        """(subnet id, its AZ, why) for a job that runs in one subnet (SageMaker, doctor)."""
        how = "given" if self.given else f"default VPC {self.vpc_id}"
        if az in self.by_az:
            return self.by_az[az][0], az, f"subnet {self.by_az[az][0]} in {az} ({how}): the plan's AZ"
        first = next(iter(self.by_az))
        why = f"no subnet in the plan's AZ {az}" if az else "the plan named no AZ"
        return self.by_az[first][0], first, f"subnet {self.by_az[first][0]} in {first} ({how}): {why}, " \
                                            "first AZ by name"


def given_subnets(text: str | None) -> list[str]:
    return [s.strip() for s in str(text or "").split(",") if s.strip()]


def job_network(ec2, region: str, subnet_flag: str | None) -> JobNetwork:
    given = given_subnets(subnet_flag)
    if given:
        try:
            subnets = ec2.describe_subnets(SubnetIds=given)["Subnets"]
        except Exception as e:  # noqa: BLE001
            from trainctl.aws import clients as aws

            if aws.error_code(e).startswith("InvalidSubnet"):
                raise UsageError(f"--subnet {subnet_flag}: not found in {region} ({aws.error_summary(e)}); "
                                 "pass subnet ids of this region") from None
            raise
    else:
        vpcs = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"]
        if not vpcs:
            raise UsageError(f"no default VPC in {region}: pass --subnet SUBNET_ID[,SUBNET_ID...]")
        subnets = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpcs[0]["VpcId"]]}])["Subnets"]
        if not subnets:
            raise UsageError(f"the default VPC {vpcs[0]['VpcId']} in {region} has no subnets: pass --subnet")
    vpc_ids = sorted({s["VpcId"] for s in subnets})
    if len(vpc_ids) != 1:
        raise UsageError(f"--subnet: the subnets must all be in one VPC, not {', '.join(vpc_ids)}")
    by_az: dict[str, list[str]] = {}
    for s in sorted(subnets, key=lambda s: (s["AvailabilityZone"], -s.get("AvailableIpAddressCount", 0),
                                            s["SubnetId"])):
        by_az.setdefault(s["AvailabilityZone"], []).append(s["SubnetId"])
    public = frozenset(s["SubnetId"] for s in subnets if s.get("MapPublicIpOnLaunch"))
    return JobNetwork(vpc_ids[0], {az: tuple(ids) for az, ids in by_az.items()}, bool(given), public)


@dataclass(frozen=True)
class S3Route:
    ok: bool
    detail: str
    fix: str = ""


def s3_route(ec2, region: str, subnet_id: str, vpc_id: str) -> S3Route:
    """A host without a public IP (a SageMaker job in a VPC) reaches S3 only through a gateway endpoint on its
    subnet's route table or a default route to a NAT gateway."""
    route = private_route(ec2, region, subnet_id, vpc_id)
    if route.route_table is None:
        return S3Route(False, f"subnet {subnet_id} has no route table", "associate a route table with the subnet")
    if route.s3_gateway:
        return S3Route(True, f"S3 gateway endpoint {route.s3_gateway} on route table {route.route_table}")
    if route.nat:
        return S3Route(True, f"default route through NAT gateway {route.nat}")
    return S3Route(False, f"route table {route.route_table} has neither an S3 gateway endpoint nor a NAT route",
                   f"aws ec2 create-vpc-endpoint --vpc-id {vpc_id} --service-name com.amazonaws.{region}.s3 "
                   f"--route-table-ids {route.route_table}  (gateway endpoints cost nothing)")


# The AWS services the EC2 node agent calls (trainctl/bootstrap: S3 for code, checkpoints and markers, EC2 to
# find its peers and tag itself, CloudWatch Logs for its log); its credentials come from IMDS, so no STS.
AGENT_INTERFACE_SERVICES = ("ec2", "logs")


def secret_services(arns) -> tuple[str, ...]:
    """The services a job reads its `secrets:` from when it starts (SSM parameters, Secrets Manager secrets):
    without a NAT, its subnet needs their interface endpoints too."""
    arns = list(arns)
    return tuple(s for s in ("ssm", "secretsmanager") if any(f":{s}:" in a for a in arns))


@dataclass(frozen=True)
class PrivateRoute:
    """How a host without a public IPv4 on a subnet reaches AWS: a NAT, or the VPC endpoints it needs."""
    nat: str | None                 # the NAT gateway of the subnet's default route
    internet_gateway: str | None    # the internet gateway of the subnet's default route (only with a public IPv4)
    s3_gateway: str | None          # an S3 gateway endpoint on the subnet's route table
    interfaces: frozenset[str]      # services with an interface endpoint (private DNS on) in the VPC
    route_table: str | None

    def reaches(self, services: tuple[str, ...] = ()) -> bool:
        """Whether S3 and `services` (through interface endpoints) are reachable; a NAT reaches everything."""
        if self.nat:
            return True
        return bool(self.s3_gateway) and set(services) <= self.interfaces

    def missing(self, services: tuple[str, ...]) -> list[str]:
        gone = [] if self.s3_gateway else ["an S3 gateway endpoint"]
        return gone + [f"an interface endpoint for {s}" for s in services if s not in self.interfaces]


def _route_table(ec2, subnet_id: str, vpc_id: str) -> dict | None:
    tables = ec2.describe_route_tables(Filters=[{"Name": "association.subnet-id", "Values": [subnet_id]}])[
        "RouteTables"]
    if not tables:  # the subnet uses its VPC's main route table
        tables = [t for t in ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])[
            "RouteTables"] if any(a.get("Main") for a in t.get("Associations", []))]
    return tables[0] if tables else None


def private_route(ec2, region: str, subnet_id: str, vpc_id: str) -> PrivateRoute:
    table = _route_table(ec2, subnet_id, vpc_id)
    rtb = table["RouteTableId"] if table else None
    default = [r for r in (table or {}).get("Routes", [])
               if r.get("DestinationCidrBlock") == "0.0.0.0/0" and r.get("State", "active") == "active"]
    nat = next((r["NatGatewayId"] for r in default if r.get("NatGatewayId")), None)
    igw = next((r["GatewayId"] for r in default if str(r.get("GatewayId", "")).startswith("igw-")), None)
    endpoints = [e for e in ec2.describe_vpc_endpoints(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}]).get(
        "VpcEndpoints", []) if str(e.get("State", "available")).lower() in ("available", "pending")]
    prefix = f"com.amazonaws.{region}."
    s3_gateway = next((e["VpcEndpointId"] for e in endpoints if e.get("ServiceName") == f"{prefix}s3"
                       and e.get("VpcEndpointType", "Gateway") == "Gateway" and rtb in e.get("RouteTableIds", [])),
                      None)
    # An interface endpoint serves the SDK's default endpoint name only with private DNS on.
    interfaces = frozenset(e["ServiceName"].removeprefix(prefix) for e in endpoints
                           if e.get("VpcEndpointType") == "Interface" and e.get("PrivateDnsEnabled")
                           and e.get("ServiceName", "").startswith(prefix))
    return PrivateRoute(nat, igw, s3_gateway, interfaces, rtb)


def private_fix(region: str, vpc_id: str, rtb: str | None, services: tuple[str, ...], nat_only: bool) -> str:
    """The one-line fix: a NAT route, or the endpoints (gateway endpoints for S3 cost nothing)."""
    nat = f"route 0.0.0.0/0 of route table {rtb or '(none)'} through a NAT gateway (aws ec2 create-nat-gateway, " \
          "aws ec2 create-route --nat-gateway-id) or pass --subnet with subnets that have one"
    if nat_only:
        return nat
    interfaces = f", interface endpoints with private DNS for {', '.join(services)}" if services else ""
    return f"{nat}, or create VPC endpoints in {vpc_id}: an S3 gateway endpoint on {rtb or 'its route table'} " \
           f"(aws ec2 create-vpc-endpoint --service-name com.amazonaws.{region}.s3){interfaces}"


def reachable_network(ec2, region: str, net: JobNetwork, services: tuple[str, ...],
                      public_ipv4: bool = False) -> tuple[JobNetwork, str]:
    """The job network cut to the subnets whose hosts reach AWS: through a NAT, or S3 gateway and interface
    endpoints for `services`, or (`public_ipv4`: a host that may get one) a subnet that assigns public IPv4
    addresses and routes 0.0.0.0/0 to an internet gateway. When none does, it is empty and the second value
    says why."""
    kept: dict[str, tuple[str, ...]] = {}
    why = ""
    for az, subnets in net.by_az.items():
        ok = []
        for sid in subnets:
            route = private_route(ec2, region, sid, net.vpc_id)
            if route.reaches(services) or (public_ipv4 and sid in net.public_ipv4 and route.internet_gateway):
                ok.append(sid)
            elif not why:
                how = "assigns no public IPv4, " if public_ipv4 and sid not in net.public_ipv4 else ""
                why = f"subnet {sid} {how}has no NAT route and lacks {', '.join(route.missing(services))}: " \
                      + private_fix(region, net.vpc_id, route.route_table, services, nat_only=False)
        if ok:
            kept[az] = tuple(ok)
    return JobNetwork(net.vpc_id, kept, net.given, net.public_ipv4), why
