"""Can the job's nodes talk Lustre to its FSx file systems? The FSx for Lustre User Guide ("File system access
control with Amazon VPC") asks for TCP 988 and 1018-1023 both ways:
- the file system's security groups (those of its network interfaces: CreateFileSystem's SecurityGroupIds are
  not returned by DescribeFileSystems) must let the clients in on both port ranges;
- the clients' security groups must let the file system's groups in on both (their default outbound rule, which
  the job's group keeps, lets everything out).

The job's own group is made at launch, so no rule of the file system's can name it: the file system must let in
the job's subnets (a CIDR rule covering them) or, when the user gives `--security-group`, that group. Anything
else is refused at launch in one line that says which rule to add. The job's own group then gets the inbound
rules from the file system's groups (`lustre_ingress`); a group the user gives must already have them.
"""
from __future__ import annotations

import ipaddress

from trainctl.backends.base import AwsCall, tags
from trainctl.errors import UsageError

LUSTRE_PORTS = ((988, 988), (1018, 1023))


def _ports(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}"


def file_system_groups(ec2, fs: dict) -> list[str]:
    enis = fs.get("NetworkInterfaceIds") or []
    found = ec2.describe_network_interfaces(NetworkInterfaceIds=enis)["NetworkInterfaces"] if enis else []
    return sorted({g["GroupId"] for eni in found for g in eni.get("Groups", [])})


def _covers(rule: dict, lo: int, hi: int) -> bool:
    if rule.get("IpProtocol") in ("-1", "all"):
        return True
    return rule.get("IpProtocol") in ("tcp", "6") and rule.get("FromPort", 0) <= lo and hi <= rule.get("ToPort", -1)


def _lets_in(rule: dict, cidrs: list[str], groups: set[str]) -> bool:
    nets = [ipaddress.ip_network(r["CidrIp"]) for r in rule.get("IpRanges", [])]
    if cidrs and any(all(ipaddress.ip_network(c).subnet_of(n) for c in cidrs) for n in nets):
        return True
    return any(pair.get("GroupId") in groups for pair in rule.get("UserIdGroupPairs", []))


def _missing(ec2, group_ids: list[str], cidrs: list[str], sources: set[str]) -> list[tuple[int, int]]:
    """The Lustre port ranges that no inbound rule of the groups lets in from the CIDRs or the source groups."""
    rules = [r for g in ec2.describe_security_groups(GroupIds=group_ids)["SecurityGroups"]
             for r in g.get("IpPermissions", [])]
    return [(lo, hi) for lo, hi in LUSTRE_PORTS
            if not any(_covers(r, lo, hi) and _lets_in(r, cidrs, sources) for r in rules)]


def refuse_unreachable(ec2, name: str, fs_id: str, fs_groups: list[str], subnets: list[str],
                       user_group: str | None) -> None:
    """UsageError (one line) when the security groups keep Lustre out."""
    if not fs_groups or not subnets:
        return
    cidrs = [s["CidrBlock"] for s in ec2.describe_subnets(SubnetIds=list(subnets))["Subnets"]]
    where = f"data: channel {name} {fs_id}"
    missing = _missing(ec2, fs_groups, cidrs, {user_group} if user_group else set())
    if missing:
        ports = " and ".join(f"TCP {_ports(lo, hi)}" for lo, hi in missing)
        source = f"{', '.join(cidrs)}{f' or {user_group}' if user_group else ''}"
        raise UsageError(f"{where}: its security groups {', '.join(fs_groups)} let no {ports} in from the job's "
                         f"nodes ({source}); add inbound TCP 988 and 1018-1023 from {cidrs[0]} to "
                         f"{fs_groups[0]} (aws ec2 authorize-security-group-ingress), or launch with "
                         "--security-group set to a group they let in")
    if user_group:
        back = _missing(ec2, [user_group], [], set(fs_groups))
        if back:
            raise UsageError(f"{where}: --security-group {user_group} lets no "
                             f"{' and '.join(f'TCP {_ports(lo, hi)}' for lo, hi in back)} in from the file "
                             f"system's groups {', '.join(fs_groups)}; add inbound TCP 988 and 1018-1023 from "
                             f"{fs_groups[0]} to {user_group}")


def lustre_ingress(channels: dict, group: str, job: str, region: str, user_group: str | None) -> list[AwsCall]:
    """Inbound TCP 988 and 1018-1023 on the job's own group from each FSx channel's file system groups."""
    groups = sorted({g for c in channels.values() if c.get("mode") == "mount" for g in c.get("security_groups", [])})
    if not groups or user_group:
        return []
    pairs = [{"GroupId": g, "Description": "Lustre from the job's FSx file system"} for g in groups]
    return [AwsCall("ec2", "AuthorizeSecurityGroupIngress", {
        "GroupId": group, "IpPermissions": [{"IpProtocol": "tcp", "FromPort": lo, "ToPort": hi,
                                             "UserIdGroupPairs": pairs} for lo, hi in LUSTRE_PORTS],
        "TagSpecifications": [{"ResourceType": "security-group-rule", "Tags": tags(job)}]},
        region, ok_errors=("InvalidPermission.Duplicate",),
        why=f"Lustre (TCP 988, 1018-1023) in from the FSx file system's groups {', '.join(groups)} only")]
