"""EC2 placement groups: Create/Describe/DeletePlacementGroup (moto lacks them).

Groups live per account and region in the sandbox context (kept across a restart: kept_state). Launches (RunInstances, CreateFleet)
look groups up here through `require`, so naming an unknown group fails as on AWS, and deleting a
group that running instances use fails with InvalidPlacementGroup.InUse, as does a launch into a cluster group
in another AZ than its first instance's (`az_conflict`).
"""
from __future__ import annotations

import fnmatch
import secrets

from trainctl_sandbox.server import ec2_actions
from trainctl_sandbox.server.context import SandboxContext
from trainctl_sandbox.server.protocol import AwsError

STRATEGIES = ("cluster", "spread", "partition")
MAX_PARTITIONS = 7


def install(ctx: SandboxContext) -> None:
    ec2_actions.define("CreatePlacementGroup", ctx, create_placement_group)
    ec2_actions.define("DescribePlacementGroups", ctx, describe_placement_groups)
    ec2_actions.define("DeletePlacementGroup", ctx, delete_placement_group)


def reset(ctx: SandboxContext) -> None:
    ctx.state.pop(__name__, None)


def kept_state(ctx: SandboxContext) -> dict:
    """The groups, kept across a sandbox restart as the account's (server/persist.py)."""
    return dict(ctx.state.get(__name__) or {})


def restore_state(ctx: SandboxContext, data: dict | None) -> None:
    ctx.state[__name__] = dict(data or {})


def _groups(ctx: SandboxContext, account: str, region: str) -> dict[str, dict]:
    return ctx.state.setdefault(__name__, {}).setdefault((account, region), {})


def require(ctx: SandboxContext, account: str, region: str, name: str) -> dict:
    """The group called `name`, or the error AWS gives a launch that names an unknown group."""
    group = _groups(ctx, account, region).get(name)
    if group is None:
        raise AwsError("InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown.")
    return group


def _tags(tag_specs: list[dict]) -> list[dict]:
    tags = []
    for spec in tag_specs or []:
        if spec.get("ResourceType") != "placement-group":
            raise AwsError("InvalidParameterValue",
                           f"'{spec.get('ResourceType')}' is not a valid taggable resource type for this operation.")
        tags += [{"Key": t["Key"], "Value": t.get("Value", "")} for t in spec.get("Tags") or []]
    return tags


def create_placement_group(ctx: SandboxContext, r) -> dict:
    name = r._get_param("GroupName")
    strategy = r._get_param("Strategy")
    partitions = r._get_param("PartitionCount")
    spread_level = r._get_param("SpreadLevel")
    if not name:
        raise AwsError("MissingParameter", "The request must contain the parameter groupName")
    if strategy not in STRATEGIES:
        raise AwsError("InvalidParameterValue",
                       f"Value ({strategy}) for parameter strategy is invalid. Valid values: {', '.join(STRATEGIES)}")
    if partitions is not None and strategy != "partition":
        raise AwsError("InvalidParameterCombination", "PartitionCount is only valid with the partition strategy.")
    if partitions is not None and not 1 <= int(partitions) <= MAX_PARTITIONS:
        raise AwsError("InvalidParameterValue", f"PartitionCount must be between 1 and {MAX_PARTITIONS}.")
    if spread_level and strategy != "spread":
        raise AwsError("InvalidParameterCombination", "SpreadLevel is only valid with the spread strategy.")
    tags = _tags(r._get_param("TagSpecifications"))
    r.error_on_dryrun()
    groups = _groups(ctx, r.current_account, r.region)
    if name in groups:
        raise AwsError("InvalidPlacementGroup.Duplicate", f"The Placement Group '{name}' already exists.")
    group = {"GroupName": name, "State": "available", "Strategy": strategy,
             "GroupId": f"pg-{secrets.token_hex(9)[:17]}", "Tags": tags,
             "GroupArn": f"arn:aws:ec2:{r.region}:{r.current_account}:placement-group/{name}"}
    if strategy == "partition":
        group["PartitionCount"] = int(partitions or 2)
    if strategy == "spread":
        group["SpreadLevel"] = spread_level or "rack"
    groups[name] = group
    return {"PlacementGroup": group}


def _matches(group: dict, name: str, values: list[str]) -> bool:
    def any_match(value: str | None) -> bool:
        return value is not None and any(fnmatch.fnmatchcase(value, v) for v in values)

    if name.startswith("tag:"):
        key = name[4:]
        return any(t["Key"] == key and any_match(t["Value"]) for t in group["Tags"])
    if name == "tag-key":
        return any(any_match(t["Key"]) for t in group["Tags"])
    field = {"group-name": "GroupName", "group-arn": "GroupArn", "group-id": "GroupId", "state": "State",
             "strategy": "Strategy", "spread-level": "SpreadLevel", "partition-count": "PartitionCount"}.get(name)
    if field is None:
        raise AwsError("InvalidParameterValue", f"The filter '{name}' is invalid")
    value = group.get(field)
    return any_match(None if value is None else str(value))


def describe_placement_groups(ctx: SandboxContext, r) -> dict:
    names = list(r._get_param("GroupNames") or [])
    ids = list(r._get_param("GroupIds") or [])
    filters = [(f["Name"], list(f.get("Values") or [])) for f in r._get_param("Filters") or []]
    r.error_on_dryrun()
    groups = _groups(ctx, r.current_account, r.region)
    for name in names:
        require(ctx, r.current_account, r.region, name)
    known_ids = {g["GroupId"] for g in groups.values()}
    for gid in ids:
        if gid not in known_ids:
            raise AwsError("InvalidPlacementGroupId.NotFound", f"The Placement Group ID '{gid}' does not exist.")
    out = [g for g in groups.values()
           if (not names or g["GroupName"] in names) and (not ids or g["GroupId"] in ids)
           and all(_matches(g, n, v) for n, v in filters)]
    return {"PlacementGroups": sorted(out, key=lambda g: g["GroupName"])}


def delete_placement_group(ctx: SandboxContext, r) -> dict:
    name = r._get_param("GroupName")
    r.error_on_dryrun()
    require(ctx, r.current_account, r.region, name)
    in_use = [i.id for i in r.ec2_backend.all_instances()
              if i.placement.group_name == name and i.state not in ("terminated", "shutting-down")]
    if in_use:
        raise AwsError("InvalidPlacementGroup.InUse", f"The placement group '{name}' is in use and may not be deleted.")
    del _groups(ctx, r.current_account, r.region)[name]
    return {}


def az_conflict(ctx: SandboxContext, account: str, region: str, backend, name: str | None,
                az: str) -> tuple[str, str] | None:
    """(code, message) when a launch in `az` names a cluster group bound to another AZ. A cluster placement group
    lives in one Availability Zone (EC2 User Guide, "Placement strategies": "A cluster placement group can't span
    multiple Availability Zones"): the sandbox binds it to the AZ of its first instance, for the group's life."""
    group = _groups(ctx, account, region).get(name or "")
    if group is None or group["Strategy"] != "cluster":
        return None
    members = [i for i in backend.all_instances() if i.placement.group_name == name]
    if not members:
        return None
    bound = min(members, key=lambda i: (i.launch_time, i.id))._placement.zone
    if bound == az:
        return None
    return ("InvalidPlacementGroup.InUse", f"The placement group '{name}' is in use in {bound}: a cluster "
                                           f"placement group cannot span Availability Zones (asked: {az}).")
