"""Which subnets a job uses, the same rule for both backends and `doctor`, and whether a subnet reaches S3.

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
            from trainctl import aws

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
    return JobNetwork(vpc_ids[0], {az: tuple(ids) for az, ids in by_az.items()}, bool(given))


@dataclass(frozen=True)
class S3Route:
    ok: bool
    detail: str
    fix: str = ""


def s3_route(ec2, region: str, subnet_id: str, vpc_id: str) -> S3Route:
    """A host without a public IP (a SageMaker job in a VPC) reaches S3 only through a gateway endpoint on its
    subnet's route table or a default route to a NAT gateway."""
    tables = ec2.describe_route_tables(Filters=[{"Name": "association.subnet-id", "Values": [subnet_id]}])[
        "RouteTables"]
    if not tables:  # the subnet uses its VPC's main route table
        tables = [t for t in ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])[
            "RouteTables"] if any(a.get("Main") for a in t.get("Associations", []))]
    if not tables:
        return S3Route(False, f"subnet {subnet_id} has no route table", "associate a route table with the subnet")
    rtb = tables[0]["RouteTableId"]
    endpoints = ec2.describe_vpc_endpoints(Filters=[
        {"Name": "vpc-id", "Values": [vpc_id]}, {"Name": "service-name", "Values": [f"com.amazonaws.{region}.s3"]}])
    for ep in endpoints.get("VpcEndpoints", []):
        if ep.get("VpcEndpointType", "Gateway") == "Gateway" and rtb in ep.get("RouteTableIds", []):
            return S3Route(True, f"S3 gateway endpoint {ep['VpcEndpointId']} on route table {rtb}")
    for route in tables[0].get("Routes", []):
        if route.get("DestinationCidrBlock") == "0.0.0.0/0" and route.get("NatGatewayId"):
            return S3Route(True, f"default route through NAT gateway {route['NatGatewayId']}")
    return S3Route(False, f"route table {rtb} has neither an S3 gateway endpoint nor a NAT route",
                   f"aws ec2 create-vpc-endpoint --vpc-id {vpc_id} --service-name com.amazonaws.{region}.s3 "
                   f"--route-table-ids {rtb}  (gateway endpoints cost nothing)")
