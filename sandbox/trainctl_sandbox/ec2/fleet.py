"""EC2 `CreateFleet` of type instant, allocated across the launch template overrides as EC2 does.

moto launches an instant fleet from the first override only and never reports an error. Here the
fleet is planned over every (launch template, override) pool: pools are ordered by the market's
allocation strategy (lowest On-Demand or Spot price, priority, or spare Spot capacity), a pool
without capacity (fault switches) or that does not offer the type gives an `Errors` entry, and
the rest of the target moves on to the next pool, so a fleet can come back partial. A
MinTargetCapacity that cannot be met launches nothing; a MaxTotalPrice stops the launches at that
many dollars an hour. ClientToken makes it idempotent.
Fleets of type maintain/request still go to moto.
"""
from __future__ import annotations

import copy
import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from trainctl.catalog import load_catalog
from trainctl_sandbox.ec2 import client_tokens, fleet_errors, launch
from trainctl_sandbox.server import ec2_actions, ec2_data
from trainctl_sandbox.ec2 import node_agents, placement_groups, root_volumes
from trainctl_sandbox.ec2.fleet_budget import Budget
from trainctl_sandbox.market import model as market_model, spot_prices, spot_scores
from trainctl_sandbox.server.context import SandboxContext
from trainctl_sandbox.server.protocol import AwsError

UNLIMITED = 1 << 30


def install(ctx: SandboxContext) -> None:
    ec2_actions.wrap("CreateFleet", ctx, create_fleet)


@dataclass
class Pool:
    """One (launch template, override) pair: where and what a share of the fleet may launch."""
    index: int
    template_spec: dict        # LaunchTemplateSpecification as echoed back (with the template id)
    override: dict             # the override as sent (echoed back in Instances and Errors)
    data: dict                 # template data with the override applied
    template_id: str
    version: str
    instance_type: str
    az: str
    subnet_id: str | None
    weight: float
    priority: float
    group: str | None
    image_id: str


@dataclass
class Plan:
    launches: list[tuple[Pool, int]] = field(default_factory=list)
    errors: list[tuple[Pool, str, str]] = field(default_factory=list)   # (pool, code, message)
    fulfilled: float = 0.0


def _pools(ctx: SandboxContext, r, configs: list[dict], unit: str) -> list[Pool]:
    backend = r.ec2_backend
    pools = []
    for config in configs:
        spec = config.get("LaunchTemplateSpecification") or {}
        template, version, tmpl = launch.template_data(backend, spec)
        for override in config.get("Overrides") or [{}]:
            data = {**copy.deepcopy(tmpl), **{k: v for k, v in override.items() if k != "Placement"}}
            data["Placement"] = {**(tmpl.get("Placement") or {}), **(override.get("Placement") or {})}
            instance_type = data.get("InstanceType")
            if not instance_type:
                raise AwsError("InvalidParameterValue", "The launch template or its override must set InstanceType.")
            subnet = override.get("SubnetId") or launch.first_nic_subnet(data.get("NetworkInterfaces"))
            az = (launch.subnet_az(backend, subnet) or override.get("AvailabilityZone")
                  or data["Placement"].get("AvailabilityZone") or f"{r.region}a")
            image = launch.resolve_image(r.current_account, r.region, data.get("ImageId"))
            if not image:
                raise AwsError("InvalidParameterValue", "The launch template or its override must set ImageId.")
            group = data["Placement"].get("GroupName")
            if group:
                placement_groups.require(ctx, r.current_account, r.region, group)
            default_weight = {"vcpu": ec2_data.vcpus(instance_type),
                              "memory-mib": ec2_data.memory_mib(instance_type)}.get(unit, 1)
            pools.append(Pool(
                index=len(pools), template_spec={"LaunchTemplateId": template.id, "Version": version},
                override=override, data=data, template_id=template.id, version=version,
                instance_type=instance_type, az=az, subnet_id=subnet,
                weight=float(override.get("WeightedCapacity") or default_weight),
                priority=float(override["Priority"]) if override.get("Priority") is not None else math.inf,
                group=group, image_id=image))
    return pools


# ----------------------------------------------------------------------------- ordering (allocation strategy)
def _od_price(region: str, t: str) -> float:
    p = load_catalog().on_demand_price("ec2", region, t)
    return p.usd_per_hour if p else math.inf


def _spot_price(ctx: SandboxContext, region: str, pool: Pool) -> float:
    level = spot_prices.spot_level(region, pool.instance_type)
    if level is None:
        return math.inf
    now = datetime.now(timezone.utc)
    return market_model.spot_price_changes(ctx.seed, pool.instance_type, pool.az, level[0], level[1], now, now)[-1][1]


def _spare(ctx: SandboxContext, region: str, pool: Pool) -> float:
    zone = ec2_data.zone_id(pool.az) or ""
    return spot_scores.zone_capacity(ctx, pool.instance_type, region, pool.az, zone, "units") * pool.weight


def order(ctx: SandboxContext, region: str, pools: list[Pool], market: str, strategy: str | None,
          want: float = 0.0) -> list[Pool]:
    """Pools in the order the allocation strategy would fill them (ties keep request order)."""
    if market == "on-demand":
        if strategy == "prioritized":
            return sorted(pools, key=lambda p: (p.priority, p.index))
        return sorted(pools, key=lambda p: (_od_price(region, p.instance_type) / p.weight, p.index))
    strategy = strategy or "lowest-price"
    if strategy == "capacity-optimized":
        return sorted(pools, key=lambda p: (-_spare(ctx, region, p), p.index))
    if strategy == "capacity-optimized-prioritized":
        # AWS: priorities "on a best-effort basis, but optimizes for capacity first" (FleetLaunchTemplateOverrides
        # Priority): pools with room for the whole target by priority, then the others by their room.
        return sorted(pools, key=lambda p: (_spare(ctx, region, p) < want,
                                            p.priority if _spare(ctx, region, p) >= want else 0,
                                            -_spare(ctx, region, p), p.index))
    if strategy == "price-capacity-optimized":
        # Cheap pools first, but a pool with little room is penalised: price per unit over sqrt(room).
        return sorted(pools, key=lambda p: (_spot_price(ctx, region, p) / p.weight
                                            / math.sqrt(1.0 + _spare(ctx, region, p)), p.index))
    return sorted(pools, key=lambda p: (_spot_price(ctx, region, p) / p.weight, p.index))


# ----------------------------------------------------------------------------- planning
class Capacity:
    """What each pool could still launch during planning; nothing is taken until the fleet launches."""

    def __init__(self, ctx: SandboxContext):
        self.ctx = ctx
        self.used: dict[tuple[str, str], int] = defaultdict(int)

    def available(self, pool: Pool) -> int:
        if self.ctx.faults.no_capacity(pool.instance_type, pool.az):
            return 0
        limit = self.ctx.faults.limit(pool.instance_type, pool.az)
        return UNLIMITED if limit is None else max(0, limit - self.used[(pool.instance_type, pool.az)])

    def use(self, pool: Pool, n: int) -> None:
        self.used[(pool.instance_type, pool.az)] += n

    def copy(self) -> Capacity:
        other = Capacity(self.ctx)
        other.used.update(self.used)
        return other


def _usable(pool: Pool, plan: Plan) -> bool:
    try:
        launch.check_offered(pool.instance_type, pool.az)
    except AwsError as e:
        plan.errors.append((pool, e.code, e.message))
        return False
    return True


def _fill_diversified(usable: list[Pool], want: float, capacity: Capacity, budget: Budget, plan: Plan,
                      counts: dict[int, int]) -> None:
    # One instance at a time round the pools, so the fleet spreads over all of them.
    live = list(usable)
    while plan.fulfilled < want and live:
        for pool in list(live):
            if plan.fulfilled >= want:
                break
            if capacity.available(pool) <= 0 or budget.affordable(pool) <= 0:
                live.remove(pool)
                if counts[pool.index] == 0 and capacity.available(pool) <= 0:
                    plan.errors.append((pool, "InsufficientInstanceCapacity",
                                        launch.insufficient_capacity(pool.instance_type, pool.az).message))
                continue
            capacity.use(pool, 1)
            budget.spend(pool, 1)
            counts[pool.index] += 1
            plan.fulfilled += pool.weight


def allocate(pools: list[Pool], want: float, capacity: Capacity, diversified: bool = False,
             budget: Budget | None = None) -> Plan:
    """Fill `want` units from `pools` in order; a pool that cannot launch records an error and is skipped."""
    plan = Plan()
    budget = budget or Budget(None, None)
    usable = [p for p in pools if _usable(p, plan)]
    counts: dict[int, int] = defaultdict(int)
    if diversified:
        _fill_diversified(usable, want, capacity, budget, plan, counts)
    else:
        for pool in usable:
            if plan.fulfilled >= want:
                break
            needed = math.ceil((want - plan.fulfilled) / pool.weight)
            room = capacity.available(pool)
            n = min(needed, room, budget.affordable(pool))
            if room < needed:
                plan.errors.append((pool, "InsufficientInstanceCapacity",
                                    launch.insufficient_capacity(pool.instance_type, pool.az).message))
            if n > 0:
                capacity.use(pool, n)
                budget.spend(pool, n)
                counts[pool.index] += n
                plan.fulfilled += n * pool.weight
    plan.launches = [(p, counts[p.index]) for p in usable if counts[p.index] > 0]
    return plan


def _budget(ctx: SandboxContext, region: str, market: str, options: dict) -> Budget:
    cap = options.get("MaxTotalPrice")
    price_of = ((lambda p: _spot_price(ctx, region, p)) if market == "spot"
                else (lambda p: _od_price(region, p.instance_type)))
    return Budget(float(cap) if cap not in (None, "") else None, price_of)


def plan_market(ctx: SandboxContext, region: str, pools: list[Pool], market: str, want: float,
                options: dict, capacity: Capacity) -> Plan:
    """Plan one market's share, honouring SingleAvailabilityZone / SingleInstanceType / MinTargetCapacity /
    MaxTotalPrice."""
    ordered = order(ctx, region, pools, market, options.get("AllocationStrategy"), want)
    diversified = market == "spot" and options.get("AllocationStrategy") == "diversified"
    keys = []
    if options.get("SingleAvailabilityZone"):
        keys.append(lambda p: p.az)
    if options.get("SingleInstanceType"):
        keys.append(lambda p: p.instance_type)
    if not keys:
        plan = allocate(ordered, want, capacity, diversified, _budget(ctx, region, market, options))
    else:
        # Try each group (one AZ and/or one type) in order of its best pool; take the first that
        # meets the target, else the one that comes closest. Errors of the groups tried are kept.
        groups: dict[tuple, list[Pool]] = {}
        for p in ordered:
            groups.setdefault(tuple(k(p) for k in keys), []).append(p)
        best, errors = None, []
        for members in groups.values():
            # what the other market left, and the whole price cap: only one group launches
            trial = allocate(members, want, capacity.copy(), diversified, _budget(ctx, region, market, options))
            errors += trial.errors
            if best is None or trial.fulfilled > best.fulfilled:
                best = trial
            if trial.fulfilled >= want:
                break
        plan = Plan(launches=best.launches, errors=errors, fulfilled=best.fulfilled)
        for pool, n in plan.launches:
            capacity.use(pool, n)
    minimum = float(options.get("MinTargetCapacity") or 0)
    if plan.fulfilled < minimum:
        # EC2 launches nothing when it cannot reach the minimum target capacity.
        return Plan(errors=plan.errors)
    return plan


def _plan_with_refusals(ctx: SandboxContext, r, pools: list[Pool], market: str, want: float, options: dict,
                        capacity: Capacity) -> Plan:
    """Pools that EC2 refuses for another reason than capacity (fleet_errors: a quota, a permission, the
    missing Spot service-linked role) report that error; the others are planned as usual."""
    refused = [(p, *err) for p in pools
               if (err := fleet_errors.error_for(ctx, r.current_account, p.instance_type, p.az, market)
                   or placement_groups.az_conflict(ctx, r.current_account, r.region, r.ec2_backend, p.group, p.az))]
    gone = {p.index for p, _, _ in refused}
    usable = [p for p in pools if p.index not in gone]
    plan = plan_market(ctx, r.region, usable, market, want, options, capacity) if usable else Plan()
    plan.errors = refused + plan.errors
    return plan


# ----------------------------------------------------------------------------- launching
def _tags(tag_specs: list[dict], resource_type: str) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for s in tag_specs or [] if s.get("ResourceType") == resource_type
            for t in s.get("Tags") or []}


def _launch(ctx: SandboxContext, r, pool: Pool, market: str, count: int, fleet_id: str,
            instance_tags: dict[str, str]) -> list[Any]:
    backend = r.ec2_backend
    granted = ctx.faults.take_capacity(pool.instance_type, pool.az, count)
    if granted == 0:
        return []
    data = pool.data
    nics = copy.deepcopy(data.get("NetworkInterfaces") or [])
    for nic in nics:  # the override's subnet is every interface's subnet (EFA interfaces share one)
        if pool.subnet_id:
            nic["SubnetId"] = pool.subnet_id
    template_tags = _tags(data.get("TagSpecifications"), "instance")
    kwargs: dict[str, Any] = dict(
        instance_type=pool.instance_type, is_instance_type_default=False, region_name=r.region,
        placement=None if pool.subnet_id or nics else pool.az,
        subnet_id=None if nics else pool.subnet_id, nics=nics,
        key_name=data.get("KeyName"), security_group_ids=list(data.get("SecurityGroupIds") or []),
        tags={"instance": {**template_tags, **instance_tags, "aws:ec2:fleet-id": fleet_id},
              "volume": _tags(data.get("TagSpecifications"), "volume")},
        ebs_optimized=bool(data.get("EbsOptimized")), metadata_options=data.get("MetadataOptions") or {},
        launch_template={"LaunchTemplateId": pool.template_id, "Version": pool.version}, fleet_id=fleet_id,
        # What the instance's own `shutdown -h` does (terminate or stop) is the template's to say.
        instance_initiated_shutdown_behavior=data.get("InstanceInitiatedShutdownBehavior"),
        instance_market_options={"MarketType": "spot"} if market == "spot" else {})
    if data.get("BlockDeviceMappings"):
        kwargs["block_device_mappings"] = data["BlockDeviceMappings"]
    reservation = backend.run_instances(pool.image_id, granted, None, list(data.get("SecurityGroups") or []), **kwargs)
    root_volumes.complete(backend, reservation.instances, data.get("BlockDeviceMappings"))  # the image's root too
    profile = data.get("IamInstanceProfile") or {}
    for instance in reservation.instances:
        instance.lifecycle = "spot" if market == "spot" else None
        if pool.group:
            instance.placement.group_name = pool.group
        if profile:
            backend.associate_iam_instance_profile(instance_id=instance.id,
                                                   iam_instance_profile_name=profile.get("Name"),
                                                   iam_instance_profile_arn=profile.get("Arn"))
    node_agents.after_launch(ctx, r.current_account, r.region, reservation.instances, nics)
    return reservation.instances


def _echo(pool: Pool) -> dict:
    out: dict[str, Any] = {"LaunchTemplateSpecification": pool.template_spec}
    if pool.override:
        out["Overrides"] = pool.override
    return out


def _register(r, fleet_id: str, params: dict, instances: list[tuple[Any, str]], fulfilled: dict[str, float]) -> None:
    """Record the fleet in moto so that DescribeFleets, DescribeFleetInstances and DeleteFleets know it."""
    from moto.ec2.models.fleets import Fleet

    target = params["TargetCapacitySpecification"]
    fleet = Fleet(r.ec2_backend, fleet_id, params.get("OnDemandOptions") or {}, params.get("SpotOptions") or {},
                  {"TotalTargetCapacity": 0}, [], params.get("ExcessCapacityTerminationPolicy"),
                  params.get("ReplaceUnhealthyInstances"), params.get("TerminateInstancesWithExpiration", True),
                  "instant", params.get("ValidFrom"), params.get("ValidUntil"), params.get("TagSpecifications") or [])
    fleet.target_capacity_specification = target
    fleet.launch_template_configs = params["LaunchTemplateConfigs"]
    fleet.target_capacity = int(target["TotalTargetCapacity"])
    fleet.on_demand_instances = [{"id": None, "instance": inst, "launch_spec": None} for inst, _ in instances]
    fleet.fulfilled_on_demand_capacity = fulfilled["on-demand"]
    fleet.fulfilled_spot_capacity = fulfilled["spot"]
    fleet.fulfilled_capacity = fulfilled["on-demand"] + fulfilled["spot"]
    r.ec2_backend.fleets[fleet_id] = fleet


def create_fleet(ctx: SandboxContext, r, call_moto) -> Any:
    if (r._get_param("Type") or "maintain") != "instant":
        return call_moto()
    params = r.params.original_dict() if hasattr(r.params, "original_dict") else dict(r.params)
    target = params["TargetCapacitySpecification"]
    unit = target.get("TargetCapacityUnitType") or "units"
    total = float(target["TotalTargetCapacity"])
    wants = {"on-demand": float(target.get("OnDemandTargetCapacity") or 0),
             "spot": float(target.get("SpotTargetCapacity") or 0)}
    rest = total - wants["on-demand"] - wants["spot"]
    if rest > 0:
        wants[target.get("DefaultTargetCapacityType") or "on-demand"] += rest
    pools = _pools(ctx, r, params["LaunchTemplateConfigs"], unit)
    r.error_on_dryrun()

    def run() -> dict:
        from moto.ec2.utils import random_fleet_id

        fleet_id = random_fleet_id()
        capacity = Capacity(ctx)
        plans = {m: _plan_with_refusals(ctx, r, pools, m, w,
                                        params.get("SpotOptions" if m == "spot" else "OnDemandOptions") or {},
                                        capacity)
                 for m, w in wants.items() if w > 0}
        instance_tags = _tags(params.get("TagSpecifications"), "instance")
        launched: list[tuple[Any, str]] = []
        answer: dict[str, list] = {"Instances": [], "Errors": []}
        fulfilled = {"on-demand": 0.0, "spot": 0.0}
        for market, plan in plans.items():
            for pool, code, message in plan.errors:
                answer["Errors"].append({"LaunchTemplateAndOverrides": _echo(pool), "Lifecycle": market,
                                         "ErrorCode": code, "ErrorMessage": message})
            for pool, count in plan.launches:
                instances = _launch(ctx, r, pool, market, count, fleet_id, instance_tags)
                if len(instances) < count:  # capacity taken by a concurrent launch since planning
                    answer["Errors"].append({"LaunchTemplateAndOverrides": _echo(pool), "Lifecycle": market,
                                             "ErrorCode": "InsufficientInstanceCapacity",
                                             "ErrorMessage": launch.insufficient_capacity(pool.instance_type,
                                                                                          pool.az).message})
                if instances:
                    launched += [(i, market) for i in instances]
                    fulfilled[market] += len(instances) * pool.weight
                    answer["Instances"].append({
                        "LaunchTemplateAndOverrides": _echo(pool), "Lifecycle": market,
                        "InstanceIds": [i.id for i in instances], "InstanceType": pool.instance_type,
                        "AvailabilityZone": pool.az, "AvailabilityZoneId": ec2_data.zone_id(pool.az),
                        "SubnetId": instances[0].subnet_id})
        _register(r, fleet_id, params, launched, fulfilled)
        return {"FleetId": fleet_id, **answer}

    return client_tokens.idempotent(ctx, r.current_account, r.region, "CreateFleet", params.get("ClientToken"),
                                    r.params, run, copy.deepcopy, copy.deepcopy)
