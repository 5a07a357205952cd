"""RunInstances as AWS does it, where moto does not: capacity, ClientToken, placement groups, SSM AMIs.

Wraps moto's RunInstances. Before moto launches anything, the request is checked as EC2 would:
the AZ must offer the type (`Unsupported`), the pool must have capacity (`InsufficientInstanceCapacity`,
HTTP 500, from the fault switches; a limited pool launches between MinCount and MaxCount), a named
placement group must exist; `resolve:ssm:` image ids are resolved. After moto launches,
Placement.GroupName is recorded on the instances (moto drops it), so DescribeInstances shows it.
The helpers here are shared with CreateFleet (fleet.py).
"""
from __future__ import annotations

from typing import Any

from moto.core.responses import ActionResult

from trainctl_sandbox.ec2 import capacity_blocks, client_tokens, node_agents
from trainctl_sandbox.server import ec2_actions, ec2_data
from trainctl_sandbox.ec2 import placement_groups, root_volumes, service_linked_roles
from trainctl_sandbox.server.context import SandboxContext
from trainctl_sandbox.server.protocol import AwsError

DEFAULT_INSTANCE_TYPE = "m1.small"  # moto's default when neither request nor template names one


def install(ctx: SandboxContext) -> None:
    ec2_actions.wrap("RunInstances", ctx, run_instances)


def reset(ctx: SandboxContext) -> None:
    client_tokens.reset(ctx)


# ----------------------------------------------------------------------------- shared with fleet.py
def template_data(backend: Any, spec: dict | None) -> tuple[Any, str, dict]:
    """(template, resolved version number, launch template data) of a LaunchTemplate specification."""
    if not spec:
        return None, "", {}
    if spec.get("LaunchTemplateId"):
        template = backend.get_launch_template(spec["LaunchTemplateId"])
    else:
        template = backend.get_launch_template_by_name(spec.get("LaunchTemplateName"))
    version = str(spec.get("Version") or "$Default")
    if version == "$Latest":
        version = str(template.latest_version_number)
    elif version == "$Default":
        version = str(template.default_version_number)
    return template, version, template.get_version(version).data


def resolve_image(account: str, region: str, image_id: str | None) -> str | None:
    """`resolve:ssm:/name[:version]` -> the AMI id that SSM parameter holds, as EC2 resolves it at launch."""
    if not image_id or not image_id.startswith("resolve:ssm:"):
        return image_id
    from moto.ssm.models import ssm_backends

    name = image_id.removeprefix("resolve:ssm:")
    try:
        param = ssm_backends[account][region].get_parameter(name)
    except Exception as e:  # noqa: BLE001 - any lookup failure is the same error to the caller
        param = None
        detail = f" ({e})"
    else:
        detail = ""
    if param is None:
        raise AwsError("InvalidParameterValue", f"Unable to resolve the SSM parameter {name} for the image id{detail}.")
    return param.value


def subnet_az(backend: Any, subnet_id: str | None) -> str | None:
    return backend.get_subnet(subnet_id).availability_zone if subnet_id else None


def check_offered(instance_type: str, az: str) -> None:
    zone = ec2_data.zone_id(az)
    region = az[:-1]
    if not ec2_data.published(instance_type) or zone is None:
        return  # moto's own validation (if enabled) decides about unknown types and zones
    if not ec2_data.offered(instance_type, region, zone):
        others = [name for name, zid in ec2_data.zones(region) if ec2_data.offered(instance_type, region, zid)]
        raise AwsError("Unsupported",
                       f"Your requested instance type ({instance_type}) is not supported in your requested "
                       f"Availability Zone ({az}). Please retry your request by not specifying an Availability "
                       f"Zone or choosing {', '.join(others) or 'another Region'}.")


def insufficient_capacity(instance_type: str, az: str) -> AwsError:
    # AWS lists this among its server errors: HTTP 500, which SDKs also retry.
    return AwsError("InsufficientInstanceCapacity",
                    f"We currently do not have sufficient {instance_type} capacity in the Availability Zone you "
                    f"requested ({az}). Our system will be working on provisioning additional capacity.", 500)


# ----------------------------------------------------------------------------- RunInstances
def first_nic_subnet(nics: list[dict] | None) -> str | None:
    for nic in nics or []:
        if int(nic.get("DeviceIndex", 0)) == 0 and nic.get("SubnetId"):
            return nic["SubnetId"]
    return None


def _place_and_profile(backend, r, tmpl: dict, group: str | None, instances) -> None:
    """The placement group on each instance, and the template's instance profile when the request names none:
    EC2 gives it (moto does not)."""
    profile = {} if r._get_param("IamInstanceProfile") else (tmpl.get("IamInstanceProfile") or {})
    for instance in instances:
        if group:
            instance.placement.group_name = group
        if profile:
            backend.associate_iam_instance_profile(instance_id=instance.id,
                                                   iam_instance_profile_name=profile.get("Name"),
                                                   iam_instance_profile_arn=profile.get("Arn"))


def run_instances(ctx: SandboxContext, r, call_moto) -> Any:
    backend = r.ec2_backend
    _, _, tmpl = template_data(backend, r._get_param("LaunchTemplate"))
    instance_type = r._get_param("InstanceType") or tmpl.get("InstanceType") or DEFAULT_INSTANCE_TYPE
    subnet = r._get_param("SubnetId") or first_nic_subnet(r._get_param("NetworkInterfaces")) \
        or first_nic_subnet(tmpl.get("NetworkInterfaces"))
    az = (subnet_az(backend, subnet) or r._get_param("Placement.AvailabilityZone")
          or (tmpl.get("Placement") or {}).get("AvailabilityZone") or f"{r.region}a")
    group = r._get_param("Placement.GroupName") or (tmpl.get("Placement") or {}).get("GroupName")
    min_count = int(r._get_param("MinCount") or 1)
    max_count = int(r._get_param("MaxCount") or min_count)
    image = r._get_param("ImageId")
    if image and image.startswith("resolve:ssm:"):
        r.params["ImageId"] = resolve_image(r.current_account, r.region, image)
    if group:
        placement_groups.require(ctx, r.current_account, r.region, group)

    market = (r._get_param("InstanceMarketOptions.MarketType")
              or (tmpl.get("InstanceMarketOptions") or {}).get("MarketType"))

    reservation = (r._get_param("CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId")
                   or ((tmpl.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {})
                   .get("CapacityReservationId"))

    def launch() -> Any:
        r.error_on_dryrun()
        if market == "spot":  # EC2 needs the Spot service-linked role first (service_linked_roles.py)
            service_linked_roles.require(r.current_account)
        check_offered(instance_type, az)
        if (conflict := placement_groups.az_conflict(ctx, r.current_account, r.region, backend, group, az)):
            raise AwsError(*conflict)
        if market == "capacity-block" or reservation:  # a bought block holds its capacity for its buyer only
            granted = capacity_blocks.take(ctx, r.current_account, r.region, reservation, market, instance_type, az,
                                           max_count)
        else:
            granted = ctx.faults.take_capacity(instance_type, az, max_count, minimum=min_count)
        if granted == 0:
            raise insufficient_capacity(instance_type, az)
        # moto launches MinCount instances; EC2 launches as many as it can up to MaxCount.
        r.params["MinCount"] = granted
        result = call_moto()
        _place_and_profile(backend, r, tmpl, group, result.result.instances)
        root_volumes.complete(backend, result.result.instances,
                              r._get_param("BlockDeviceMappings") or tmpl.get("BlockDeviceMappings"))
        nics = r._get_param("NetworkInterfaces") or tmpl.get("NetworkInterfaces") or []
        if market == "capacity-block" or reservation:  # they hold the block's capacity until terminated
            capacity_blocks.record(ctx, r.current_account, r.region, reservation,
                                   [i.id for i in result.result.instances])
        node_agents.after_launch(ctx, r.current_account, r.region, result.result.instances, list(nics))
        return result

    def replay(reservation_id: str) -> ActionResult:
        return ActionResult(backend.reservations[reservation_id])

    return client_tokens.idempotent(ctx, r.current_account, r.region, "RunInstances", r._get_param("ClientToken"),
                                    r.params, launch, replay, lambda result: result.result.id)
