"""EC2 `GetSpotPlacementScores`, answered from the seedable market model (moto lacks it).

The request's shape matters as on AWS: SingleAvailabilityZone=true scores AZs (by AZ id),
false scores Regions; a bigger TargetCapacity (in units, vCPUs or MiB) scores lower; fewer than
three instance types never scores high. A type an AZ does not offer adds no capacity there, and
a capacity fault switched on for a pool takes that pool's capacity away, so a score agrees with
what a launch would meet.
"""
from __future__ import annotations

import base64
import json
import time

from trainctl.catalog import load_catalog
from trainctl_sandbox.server import ec2_actions, ec2_data
from trainctl_sandbox.market import model as market_model
from trainctl_sandbox.server.context import SandboxContext
from trainctl_sandbox.server.protocol import AwsError

DEFAULT_PAGE = 10  # AWS lists the top 10 locations unless asked for more
# New request configurations an account may ask per 24 h. AWS publishes no number ("we can limit the number
# of new request configurations within a 24-hour period", EC2 User Guide, Spot placement score, Limitations);
# the sandbox's default is generous, and `set_score_config_limit` lowers it for a test.
DEFAULT_CONFIG_LIMIT = 50
DAY_S = 24 * 3600
CONFIG_LIMIT_MESSAGE = ("You have exceeded your maximum allowed Spot placement configurations. You can retry "
                        "configurations that you used within the last 24 hours, or wait for 24 hours before "
                        "specifying a new configuration.")


def install(ctx: SandboxContext) -> None:
    ec2_actions.define("GetSpotPlacementScores", ctx, get_spot_placement_scores)


def _budget(ctx: SandboxContext) -> dict:
    return ctx.state.setdefault(__name__, {"limit": DEFAULT_CONFIG_LIMIT, "seen": {}})


def reset(ctx: SandboxContext) -> None:
    ctx.state.pop(__name__, None)


def spend_configuration(ctx: SandboxContext, account: str, configuration: str, now: float | None = None) -> None:
    """A configuration (instance types or requirements, target capacity, unit, single AZ or not) asked in the
    last 24 h may be asked again; a new one beyond the account's limit is refused with MaxConfigLimitExceeded.
    The Region filter is not part of it: the guide names only capacity, unit and types or attributes."""
    now = time.time() if now is None else now
    budget = _budget(ctx)
    seen = budget["seen"].setdefault(account, {})
    for old in [c for c, t in seen.items() if now - t >= DAY_S]:
        del seen[old]
    if configuration in seen:
        return
    if len(seen) >= budget["limit"]:
        raise AwsError("MaxConfigLimitExceeded", CONFIG_LIMIT_MESSAGE)
    seen[configuration] = now


def set_score_config_limit(ctx: SandboxContext, payload: dict) -> dict:
    """Admin action: {"limit": N} new configurations per account per 24 h; the answer lists those spent."""
    if "limit" in payload:
        limit = int(payload["limit"])
        if limit < 0:
            raise ValueError("limit must be >= 0")
        _budget(ctx)["limit"] = limit
    budget = _budget(ctx)
    return {"limit": budget["limit"], "configurations": {a: sorted(c) for a, c in budget["seen"].items()}}


ADMIN_ACTIONS = {"set_score_config_limit": set_score_config_limit}


def _types_matching(req: dict) -> list[str]:
    """Instance types meeting InstanceRequirementsWithMetadata (vCPUs, memory, architecture, accelerators)."""
    ir = req.get("InstanceRequirements") or {}
    archs = set(req.get("ArchitectureTypes") or [])

    def within(value: float, bounds: dict | None) -> bool:
        bounds = bounds or {}
        return bounds.get("Min", 0) <= value <= bounds.get("Max", float("inf"))

    out = []
    for t in ec2_data.all_instance_types():
        info = ec2_data.instance_type_info(t) or {}
        gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
        neuron = (info.get("NeuronInfo") or {}).get("NeuronDevices") or []
        accel = sum(g.get("Count", 0) for g in gpus) + sum(n.get("Count", 0) for n in neuron)
        makers = {g.get("Manufacturer", "").lower() for g in gpus} | ({"amazon-web-services"} if neuron else set())
        if archs and not archs & set((info.get("ProcessorInfo") or {}).get("SupportedArchitectures") or []):
            continue
        if not within(ec2_data.vcpus(t), ir.get("VCpuCount")) or not within(ec2_data.memory_mib(t), ir.get("MemoryMiB")):
            continue
        if "AcceleratorCount" in ir and not within(accel, ir["AcceleratorCount"]):
            continue
        if ir.get("AcceleratorManufacturers") and not makers & set(ir["AcceleratorManufacturers"]):
            continue
        out.append(t)
    return out


def _units(instance_type: str, pool_vcpus: float, unit: str) -> float:
    """Express a pool's spare vCPUs in the request's capacity unit."""
    if unit == "vcpu":
        return pool_vcpus
    instances = pool_vcpus / ec2_data.vcpus(instance_type)
    return instances * ec2_data.memory_mib(instance_type) if unit == "memory-mib" else instances


def zone_capacity(ctx: SandboxContext, instance_type: str, region: str, az_name: str, az_id: str, unit: str) -> float:
    """Spare capacity of one pool in the request's unit, after offerings and fault switches."""
    if not ec2_data.offered(instance_type, region, az_id) or ctx.faults.no_capacity(instance_type, az_name):
        return 0.0
    advice = load_catalog().spot_advice(region, instance_type)
    vcpus = market_model.pool_vcpus(ctx.seed, instance_type, az_id, advice.interruption_band if advice else None)
    limit = ctx.faults.limit(instance_type, az_name)
    if limit is not None:
        vcpus = min(vcpus, limit * ec2_data.vcpus(instance_type))
    return _units(instance_type, vcpus, unit)


def scores(ctx: SandboxContext, types: list[str], capacity: int, unit: str, single_az: bool,
           regions: list[str]) -> list[dict]:
    """Every scored location, best first (ties by name, so pages are stable)."""
    out = []
    for region in regions:
        per_zone = []
        for az_name, az_id in ec2_data.zones(region):
            available = sum(zone_capacity(ctx, t, region, az_name, az_id, unit) for t in types)
            per_zone.append((az_id, available))
        if single_az:
            out += [{"Region": region, "AvailabilityZoneId": az_id,
                     "Score": market_model.placement_score(capacity, avail, len(types))} for az_id, avail in per_zone]
        else:
            total = sum(avail for _, avail in per_zone)
            out.append({"Region": region, "Score": market_model.placement_score(capacity, total, len(types))})
    return sorted(out, key=lambda s: (-s["Score"], s["Region"], s.get("AvailabilityZoneId", "")))


def _page(items: list[dict], max_results: int, token: str | None, fingerprint: str) -> tuple[list[dict], str | None]:
    start = 0
    if token:
        try:
            state = json.loads(base64.urlsafe_b64decode(token.encode()))
            start = int(state["offset"])
            if state["request"] != fingerprint:
                raise ValueError("token of another request")
        except (ValueError, KeyError, TypeError) as e:
            raise AwsError("InvalidParameterValue", f"The NextToken is not valid: {token}") from e
    end = start + max_results
    nxt = None
    if end < len(items):
        nxt = base64.urlsafe_b64encode(json.dumps({"offset": end, "request": fingerprint}).encode()).decode()
    return items[start:end], nxt


def get_spot_placement_scores(ctx: SandboxContext, r) -> dict:
    types = list(r._get_param("InstanceTypes") or [])
    requirements = r._get_param("InstanceRequirementsWithMetadata")
    if bool(types) == bool(requirements):
        raise AwsError("InvalidParameterCombination",
                       "Specify either InstanceTypes or InstanceRequirementsWithMetadata, but not both.")
    if requirements:
        types = _types_matching(requirements)
        if not types:
            raise AwsError("InvalidParameterValue", "No instance types match the specified instance requirements.")
    unknown = sorted(t for t in types if ec2_data.instance_type_info(t) is None)
    if unknown:
        raise AwsError("InvalidParameterValue", f"The following instance types are not valid: {', '.join(unknown)}")
    capacity = int(r._get_param("TargetCapacity"))
    unit = r._get_param("TargetCapacityUnitType") or "units"
    single_az = bool(r._get_param("SingleAvailabilityZone"))
    known = ec2_data.regions()
    regions = list(r._get_param("RegionNames") or known)
    bad = sorted(set(regions) - set(known))
    if bad:
        raise AwsError("InvalidParameterValue", f"The following Regions are not valid: {', '.join(bad)}")
    max_results = int(r._get_param("MaxResults") or DEFAULT_PAGE)
    r.error_on_dryrun()

    configuration = json.dumps([requirements or sorted(types), capacity, unit, single_az], sort_keys=True)
    spend_configuration(ctx, r.current_account, configuration)
    fingerprint = json.dumps([sorted(types), capacity, unit, single_az, sorted(regions)])
    items, token = _page(scores(ctx, types, capacity, unit, single_az, regions), max_results,
                         r._get_param("NextToken"), fingerprint)
    return {"SpotPlacementScores": items, "NextToken": token}
