"""Availability zones by name and id, and Spot placement scores: one query for the planner, the EC2
backend and `doctor`.

AZ names (us-east-1a) map to different physical zones in different accounts; AZ ids (use1-az4) do not.
GetSpotPlacementScores answers by AZ id, so every score is turned into this account's AZ names here.
"""
from __future__ import annotations


# AWS recommends at least three instance types per placement-score request; fewer always scores low.
MIN_TYPES_PER_SCORE_REQUEST = 3


def az_ids_to_names(ec2) -> dict[str, str]:
    """AZ id -> AZ name for this account (availability zones only: no Local or Wavelength Zones)."""
    resp = ec2.describe_availability_zones(Filters=[{"Name": "zone-type", "Values": ["availability-zone"]}])
    return {z["ZoneId"]: z["ZoneName"] for z in resp["AvailabilityZones"]}


def placement_scores(ec2, region: str, types: list[str], count: int) -> dict[str, int]:
    """AZ id -> score (1-10) for a single-AZ request of `count` instances of any of `types` in `region`."""
    scores: dict[str, int] = {}
    token = None
    while True:
        kwargs = dict(InstanceTypes=types, TargetCapacity=count, TargetCapacityUnitType="units",
                      SingleAvailabilityZone=True, RegionNames=[region], MaxResults=10)
        if token:
            kwargs["NextToken"] = token
        resp = ec2.get_spot_placement_scores(**kwargs)
        for s in resp.get("SpotPlacementScores", []):
            if s.get("AvailabilityZoneId"):
                scores[s["AvailabilityZoneId"]] = int(s["Score"])
        token = resp.get("NextToken")
        if not token:
            return scores
