"""An EC2 launch into reserved capacity: a bought Capacity Block, or an On-Demand Capacity Reservation the account
holds; one RunInstances into the reservation, in its AZ.

EC2 launches into a Capacity Block only with the purchasing option `capacity-block` and the block's reservation
targeted (EC2 User Guide, "Launch instances using Capacity Blocks": `--instance-market-options
MarketType=capacity-block` and `--capacity-reservation-specification CapacityReservationTarget=...`), into a subnet
of the block's AZ, once the block is active. So the request `prepare` made (its instant fleets, one per AZ, in a
cluster placement group) becomes: the same calls up to the launch template, then one RunInstances of all the
nodes (MinCount = MaxCount: all or nothing, as the fleets were) into a subnet of the block's AZ. No placement group:
a block's instances are placed together in an EC2 UltraCluster already (EC2 API Reference, CapacityBlock), and the
reservation, not a group, decides where they run. RunInstances rather than a fleet: it is the call the guide shows
for blocks, and a fleet of one AZ, one type and one reservation adds nothing to it.
"""
from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

from trainctl.backends.base import JOB_TAG, AwsCall, LaunchRequest, tags
from trainctl.errors import UsageError

MARKET = "capacity-block"
REPLACED = ("CreateFleet", "CreatePlacementGroup")


def into_block(request: LaunchRequest, option) -> LaunchRequest:
    """`request` launching into the option's bought block (`option.capacity_block.reservation_id`; a
    `${capacity_reservation_id}` placeholder while it is still to buy, as --dry-run shows)."""
    block = option.capacity_block
    return _into(request, option, block.availability_zone, block.reservation_id or "${capacity_reservation_id}",
                 MARKET, f"capacity block {block.reservation_id or '(bought first)'}",
                 "no placement group (a block's instances are placed together by EC2)")


def into_reservation(request: LaunchRequest, option) -> LaunchRequest:
    """`request` launching into the account's On-Demand Capacity Reservation (`option.capacity_reservation`): the
    same RunInstances on the On-Demand market (no InstanceMarketOptions), the reservation targeted by its ID, which
    EC2 allows for an `open` reservation as for a `targeted` one (EC2 User Guide, "Launch instances into an existing
    Capacity Reservation"). RunInstances: an EC2 Fleet reaches a targeted reservation only through a resource group
    (EC2 User Guide, "Use Capacity Reservations to reserve On-Demand capacity in EC2 Fleet"). No placement group:
    the reservation, not a group, decides where the instances run."""
    held = option.capacity_reservation
    return _into(request, option, held.availability_zone, held.reservation_id, None,
                 f"On-Demand Capacity Reservation {held.reservation_id}",
                 "no placement group (the instances run where the reservation holds them)")


def _into(request: LaunchRequest, option, az: str, reservation: str, market: str | None, what: str,
          placement: str) -> LaunchRequest:
    fleets = [c for c in request.calls if c.operation == "CreateFleet"]
    if not fleets:  # the job's instances already run: nothing to launch
        return request
    fleet = next((c for c in fleets if c.about.get("availability_zone") == az), None)
    if fleet is None:
        raise UsageError(f"the {what} is in {az} and the job's VPC has no usable subnet there (the fleets would go "
                         f"to {', '.join(c.about.get('availability_zone', '?') for c in fleets)}); pass --subnet with "
                         "a subnet of that AZ")
    template = next((c for c in request.calls if c.operation == "CreateLaunchTemplate"), None)
    run = AwsCall("ec2", "RunInstances", run_params(request.job_id, fleet.params, template, reservation, market),
                  request.region, why=f"{option.count} x {option.instance_type} into {what} in {az}")
    calls = [c for c in request.calls if c.operation not in REPLACED] + [run]
    note = (f"into the {what} in {az}: one RunInstances of {option.count} node{'s' if option.count != 1 else ''} "
            f"(all or nothing), {placement}")
    return dataclasses.replace(request, calls=tuple(calls), alternatives=(),
                               notes=tuple(n for n in request.notes if "fleets are alternatives" not in n) + (note,))


def node_config(option) -> dict:
    """The node config's block end (epoch seconds) and reservation: the agent checkpoints and stops before EC2 reclaims the nodes
    (bootstrap/block_end.py); nothing outside a block."""
    if option.capacity_block is None:
        return {}
    end = datetime.fromisoformat(option.capacity_block.end)
    return {"capacity_block_end": int((end if end.tzinfo else end.replace(tzinfo=timezone.utc)).timestamp()),
            "capacity_reservation_id": option.capacity_block.reservation_id}  # the end read again (block_end.py)


def run_params(job: str, fleet: dict, template: AwsCall | None, reservation: str, market: str | None = MARKET) -> dict:
    """RunInstances for the nodes the fleet asked for, with the fleet's launch template, client token and first
    subnet, on `market` (None: On-Demand, RunInstances' default). A template with network interfaces (EFA) takes its subnet on each interface: EC2 refuses a request-level
    SubnetId beside them."""
    config = fleet["LaunchTemplateConfigs"][0]
    count = int(fleet["TargetCapacitySpecification"]["TotalTargetCapacity"])
    subnet = config["Overrides"][0]["SubnetId"]
    params: dict = {
        "LaunchTemplate": config["LaunchTemplateSpecification"], "MinCount": count, "MaxCount": count,
        "ClientToken": fleet["ClientToken"], **({"InstanceMarketOptions": {"MarketType": market}} if market else {}),
        "CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": reservation}},
        "TagSpecifications": [{"ResourceType": r, "Tags": tags(job)} for r in ("instance", "volume")],
    }
    nics = (template.params["LaunchTemplateData"].get("NetworkInterfaces") if template else None)
    if nics:
        params["NetworkInterfaces"] = [dict(n, SubnetId=subnet) for n in nics]
    else:
        params["SubnetId"] = subnet
    return params


def kept_blocks(ec2, job: str) -> list[str]:
    """What `down` says of the job's Capacity Blocks: kept, since AWS cannot cancel one (CancelCapacityReservation:
    "You can't modify or cancel a Capacity Block"); its instances are gone, its fee was paid at purchase."""
    # (DescribeCapacityReservations documents no tag: filter: the job's tag is matched here)
    found = ec2.describe_capacity_reservations(Filters=[{"Name": "state", "Values": ["active", "scheduled"]}])
    return [f"capacity block {r['CapacityReservationId']} kept: a Capacity Block cannot be cancelled (its fee was "
            f"paid when bought); it ends {r['EndDate'].astimezone(timezone.utc):%Y-%m-%d %H:%M} UTC"
            for r in found.get("CapacityReservations", []) if r.get("ReservationType") == "capacity-block"
            and {"Key": JOB_TAG, "Value": job} in r.get("Tags", [])]
