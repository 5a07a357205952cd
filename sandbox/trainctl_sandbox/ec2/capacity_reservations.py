"""EC2 On-Demand Capacity Reservations: `CreateCapacityReservation` and `CancelCapacityReservation` (the sandbox's
own; a test makes the reservations an account holds with them, as a user would with the AWS CLI).

A reservation is kept beside the account's Capacity Blocks (ec2/capacity_blocks.py: one store, so
DescribeCapacityReservations lists both and RunInstances launches into either through `capacity_blocks.take`), with
ReservationType `default`, `active` from its creation until its EndDate (EndDateType `limited`) or its cancellation.
AWS's rules kept (EC2 API Reference, CreateCapacityReservation, CancelCapacityReservation; EC2 User Guide, "Create a
Capacity Reservation"): InstanceType, InstancePlatform and InstanceCount (>= 1) are required; the AZ must be one of
the Region's and offer the type; EndDate is given if and only if EndDateType is `limited`, and lies ahead;
InstanceMatchCriteria `open` (the default) or `targeted`; Tenancy `default` (the default) or `dedicated`. What a
launch into one must match (type, platform, AZ, tenancy, active, enough available) is checked by
`capacity_blocks.take`. Not modelled: instances launched without a target running in an `open` reservation
(trainctl always targets it), future-dated reservations, the On-Demand quota a reservation takes.
"""
from __future__ import annotations

import hashlib
from datetime import datetime, timezone

from trainctl_sandbox.ec2 import capacity_blocks
from trainctl_sandbox.server import ec2_actions, ec2_data
from trainctl_sandbox.server.context import SandboxContext
from trainctl_sandbox.server.protocol import AwsError

MATCH = ("open", "targeted")
TENANCY = ("default", "dedicated")


def install(ctx: SandboxContext) -> None:
    ec2_actions.define("CreateCapacityReservation", ctx, create)
    ec2_actions.define("CancelCapacityReservation", ctx, cancel)


def _utc(t) -> datetime:
    t = t if isinstance(t, datetime) else datetime.fromisoformat(str(t).replace("Z", "+00:00"))
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


def _zone(region: str, r, itype: str) -> str:
    zones = dict(ec2_data.zones(region))
    az = r._get_param("AvailabilityZone") or next((n for n, i in zones.items()
                                                   if i == r._get_param("AvailabilityZoneId")), None)
    if az not in zones:
        raise AwsError("InvalidParameterValue", f"Invalid availability zone: [{az}]")
    if not ec2_data.offered(itype, region, zones[az]):
        raise AwsError("Unsupported", f"Your requested instance type ({itype}) is not supported in your requested "
                                      f"Availability Zone ({az}).")
    return az


def create(ctx: SandboxContext, r) -> dict:
    itype, platform, count = (r._get_param("InstanceType"), r._get_param("InstancePlatform"),
                              r._get_param("InstanceCount"))
    if not itype or not platform or count is None:
        raise AwsError("MissingParameter", "InstanceType, InstancePlatform and InstanceCount are required.")
    if int(count) < 1:
        raise AwsError("InvalidParameterValue", f"The InstanceCount {count} is not valid: it must be at least 1.")
    az = _zone(r.region, r, itype)
    end_type, end = r._get_param("EndDateType") or "unlimited", r._get_param("EndDate")
    match, tenancy = r._get_param("InstanceMatchCriteria") or "open", r._get_param("Tenancy") or "default"
    now = datetime.now(timezone.utc).replace(microsecond=0)
    if (end_type == "limited") != (end is not None) or end_type not in ("limited", "unlimited"):
        raise AwsError("InvalidParameterCombination", "EndDate must be provided if and only if EndDateType is "
                                                      "limited.")
    if end is not None and _utc(end) <= now:
        raise AwsError("InvalidParameterValue", "The EndDate must be in the future.")
    if match not in MATCH or tenancy not in TENANCY:
        raise AwsError("InvalidParameterValue", f"InstanceMatchCriteria must be one of {MATCH} and Tenancy one of "
                                                f"{TENANCY}.")
    r.error_on_dryrun()
    tags = [t for spec in (r._get_param("TagSpecifications") or []) for t in spec.get("Tags", [])]
    store = capacity_blocks.store(ctx).setdefault(r.current_account, [])
    cr_id = "cr-" + hashlib.sha256(f"{r.current_account}{r.region}{len(store)}{now}".encode()).hexdigest()[:17]
    reservation = {"CapacityReservationId": cr_id, "OwnerId": r.current_account, "InstanceType": itype,
                   "InstancePlatform": platform, "AvailabilityZone": az, "Tenancy": tenancy,
                   "TotalInstanceCount": int(count), "AvailableInstanceCount": int(count), "StartDate": now,
                   "EndDate": _utc(end) if end is not None else None, "EndDateType": end_type,
                   "InstanceMatchCriteria": match, "ReservationType": "default", "State": "active", "Tags": tags,
                   "CreateDate": now}
    store.append({k: v for k, v in reservation.items() if k != "CreateDate"} | {"Region": r.region})
    return {"CapacityReservation": {k: v for k, v in reservation.items() if v is not None}}


def cancel(ctx: SandboxContext, r) -> dict:
    rid = r._get_param("CapacityReservationId")
    held = next((b for b in capacity_blocks.store(ctx).get(r.current_account, [])
                 if b["CapacityReservationId"] == rid and b["Region"] == r.region), None)
    if held is None:
        raise AwsError("InvalidCapacityReservationId.NotFound", f"The Capacity Reservation ID '{rid}' does not exist.")
    if held["ReservationType"] == "capacity-block":
        raise AwsError("InvalidParameterValue", "You can't modify or cancel a Capacity Block.")
    r.error_on_dryrun()
    held["State"] = "cancelled"   # its instances run on, outside it (EC2 User Guide, "Cancel a Capacity Reservation")
    held["InstanceIds"] = []
    return {"Return": True}
