"""Everything the planner knows about the market, as one value (built by market.py, or by a test).

Keys use plain instance type names (g5.2xlarge, never ml.g5.2xlarge) and AZ names (us-east-1a).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SpotPrice:
    mean_usd: float      # time-weighted mean over the window
    latest_usd: float
    window_hours: float


@dataclass(frozen=True)
class BlockOffer:
    """One EC2 Capacity Block offering (DescribeCapacityBlockOfferings), with its start as hours from when it was
    asked: the planner reads no clock."""
    offering_id: str
    availability_zone: str
    instance_count: int
    start: str              # ISO 8601, UTC
    end: str
    duration_hours: float
    wait_hours: float       # from the ask to the start (0 when it starts now)
    upfront_fee_usd: float
    reservation_id: str | None = None   # a block the account already holds (DescribeCapacityReservations): fee 0


@dataclass(frozen=True)
class HeldReservation:
    """An On-Demand Capacity Reservation the account owns (DescribeCapacityReservations: `active`, ReservationType
    `default`, Linux/UNIX, shared tenancy): capacity paid for at the On-Demand rate whether used or not
    (aws/capacity_reservations.py). Its hours left are reckoned from when it was read: the planner reads no clock."""
    reservation_id: str
    availability_zone: str
    available: int              # AvailableInstanceCount: instances it can still take
    total: int                  # TotalInstanceCount
    match: str                  # InstanceMatchCriteria: "open" | "targeted"
    end: str | None = None      # ISO 8601 UTC; None: no end (EndDateType unlimited)
    hours_left: float | None = None   # to its end; None: no end


@dataclass(frozen=True)
class Quotes:
    source: str                                   # "live" | "offline"
    regions: tuple[str, ...]                      # regions whose data arrived (failed regions are left out)
    # Live On-Demand prices: (platform, region, instance_type) -> USD/h. Missing keys fall back to the catalog.
    on_demand: dict[tuple[str, str, str], float] = field(default_factory=dict)
    # EC2 Spot prices: (region, instance_type) -> {az_name: SpotPrice}
    spot_prices: dict[tuple[str, str], dict[str, SpotPrice]] = field(default_factory=dict)
    # Spot placement scores for a single-AZ request of `count` nodes: (region, instance_type, count) -> {az: 1..10}
    placement_scores: dict[tuple[str, str, int], dict[str, int]] = field(default_factory=dict)
    # the instance types of the configuration each score was asked for (same keys): fewer than three score low
    score_configs: dict[tuple[str, str, int], tuple[str, ...]] = field(default_factory=dict)
    # Quotas: (region, service_code, key) -> value. EC2: by QuotaCode, in vCPUs; SageMaker: by quota name
    # ("ml.g5.xlarge for training job usage": its codes are per type and unpublished), in instances.
    quotas: dict[tuple[str, str, str], float] = field(default_factory=dict)
    # The QuotaCode of each SageMaker quota read by name (same keys): the increase request needs it.
    quota_codes: dict[tuple[str, str, str], str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    # EC2 Capacity Block offerings: (region, instance_type, count) -> offers (live plans only; offline: none)
    capacity_blocks: dict[tuple[str, str, int], tuple[BlockOffer, ...]] = field(default_factory=dict)
    # SageMaker training plan offerings (aws/training_plans.py), keyed as the blocks
    training_plans: dict[tuple[str, str, int], tuple[BlockOffer, ...]] = field(default_factory=dict)
    # On-Demand Capacity Reservations the account holds: (region, instance_type) -> reservations (live plans only)
    capacity_reservations: dict[tuple[str, str], tuple[HeldReservation, ...]] = field(default_factory=dict)

    @classmethod
    def offline(cls, regions: list[str] | tuple[str, ...], warnings: tuple[str, ...] = ()) -> Quotes:
        return cls(source="offline", regions=tuple(regions), warnings=warnings)
