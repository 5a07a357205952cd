"""The job's cluster placement groups: one per AZ its fleets may try (AWS binds a cluster group to the AZ of its
first instance and refuses a launch into it from another AZ), named by `common.group_for`; `down` deletes them all."""
from __future__ import annotations

from trainctl.backends.base import AwsCall, tags
from trainctl.backends.ec2.common import MAX_AZ_ATTEMPTS, group_for


def placement_group_calls(job: str, azs: list[str], region: str) -> list[AwsCall]:
    """One cluster placement group per AZ the fleets may try: a cluster group lives in one AZ (the first
    instance's), so a fleet or a recovery in another AZ needs its own."""
    return [AwsCall("ec2", "CreatePlacementGroup", {
        "GroupName": group_for(job, az, i == 0), "Strategy": "cluster",
        "TagSpecifications": [{"ResourceType": "placement-group", "Tags": tags(job)}]},
        region, ok_errors=("InvalidPlacementGroup.Duplicate",), why=f"all nodes on one low-latency network spine in {az}")
        for i, az in enumerate(azs[:MAX_AZ_ATTEMPTS])]
