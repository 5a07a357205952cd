"""Facts about EC2's geography and instance types, read from the data moto ships.

Placement scores answer with AZ ids and launches name AZs; both must agree with what moto's
DescribeAvailabilityZones says (ZoneId per ZoneName), so every mapping comes from moto's own
table. Which types each AZ offers also comes from moto (by AZ id, the account-independent name), and, for the types
moto lacks, from AWS's published offerings (az_offerings.py), added to moto's table at import so that
DescribeInstanceTypeOfferings, launches, Spot prices and placement scores all see them.
"""
from __future__ import annotations

from functools import lru_cache

from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend
from moto.ec2.models.instance_types import INSTANCE_TYPE_OFFERINGS, INSTANCE_TYPES

from trainctl_sandbox.server import az_offerings


def regions() -> list[str]:
    """Regions enabled in every account (what AWS scores when a request names no regions)."""
    return [r.name for r in RegionsAndZonesBackend.regions if r.opt_in_status == "opt-in-not-required"]


def zones(region: str) -> list[tuple[str, str]]:
    """(AZ name, AZ id) of the region's availability zones (no local or wavelength zones)."""
    return [(z.name, z.zone_id) for z in RegionsAndZonesBackend.zones.get(region, [])
            if z.zone_type == "availability-zone"]


def zone_id(az_name: str) -> str | None:
    region = az_name[:-1]
    return dict(zones(region)).get(az_name)


def _add_published_offerings() -> None:
    """az_offerings' rows into moto's table, by AZ id, AZ name and region (once per process)."""
    have = {(o["InstanceType"], o["Location"]) for o in
            (o for offers in INSTANCE_TYPE_OFFERINGS["availability-zone-id"].values() for o in offers)}
    for itype, by_region in az_offerings.BY_AZ_ID.items():
        for region, ids in by_region.items():
            names = {zid: name for name, zid in zones(region)}
            rows = {"availability-zone-id": [z for z in ids if (itype, z) not in have],
                    "availability-zone": [names[z] for z in ids if (itype, z) not in have and z in names],
                    "region": [region] if ids and all((itype, z) not in have for z in ids) else []}
            for kind, locations in rows.items():
                INSTANCE_TYPE_OFFERINGS[kind].setdefault(region, []).extend(
                    {"InstanceType": itype, "Location": where, "LocationType": kind} for where in locations)


_add_published_offerings()


def published(instance_type: str) -> bool:
    """Whether the sandbox knows the type's offerings (moto's instance types, or az_offerings)."""
    return instance_type in INSTANCE_TYPES or instance_type in az_offerings.BY_AZ_ID


@lru_cache(maxsize=64)
def _offered_by_zone_id(region: str) -> dict[str, frozenset[str]]:
    out: dict[str, set[str]] = {}
    for o in INSTANCE_TYPE_OFFERINGS["availability-zone-id"].get(region, []):
        out.setdefault(o["Location"], set()).add(o["InstanceType"])
    return {k: frozenset(v) for k, v in out.items()}


def offered(instance_type: str, region: str, zone: str) -> bool:
    """Whether the AZ (by id) offers the type. Regions moto has no offering data for offer everything."""
    by_zone = _offered_by_zone_id(region)
    return not by_zone or instance_type in by_zone.get(zone, frozenset())


def instance_type_info(instance_type: str) -> dict | None:
    """moto's DescribeInstanceTypes record of the type, or None for a type EC2 does not have."""
    return INSTANCE_TYPES.get(instance_type)


def vcpus(instance_type: str) -> int:
    info = instance_type_info(instance_type) or {}
    return int(info.get("VCpuInfo", {}).get("DefaultVCpus", 1))


def memory_mib(instance_type: str) -> int:
    info = instance_type_info(instance_type) or {}
    return int(info.get("MemoryInfo", {}).get("SizeInMiB", 1024))


def all_instance_types() -> list[str]:
    return sorted(INSTANCE_TYPES)
