"""A seedable Spot market: spare capacity per pool, placement scores, and Spot prices over time.

Pure and deterministic: every number is a function of (seed, instance type, location, time), so
two sandboxes with the same seed agree, a test can predict nothing but can rely on repeatability,
and a demo looks the same every time. No clock is read here; callers pass times in.
"""
from __future__ import annotations

import hashlib
import math
import struct
from datetime import datetime, timedelta, timezone

# Spare Spot capacity scales with how rarely the Spot advisor says a type is reclaimed: a pool that
# is seldom interrupted is a pool with room. Bands as in the catalog's spot_advisor.
BAND_CAPACITY = {"<5%": 1.6, "5-10%": 1.25, "10-15%": 1.0, "15-20%": 0.75, ">20%": 0.5}
POOL_VCPUS = 2000.0          # typical spare vCPUs of one type in one AZ, before band and noise
MIN_TYPES_FOR_GOOD_SCORE = 3  # AWS: fewer than three instance types always score low
LOW_SCORE_CAP = 3

PRICE_PERIOD = timedelta(hours=4)   # a pool's Spot price changes about every four hours
PRICE_WINDOW = 6                    # the walk is a moving average of this many steps of noise
PRICE_SWING = 0.12                  # +-12% around the pool's level
AZ_SPREAD = 0.08                    # pools of one type differ by up to +-8% across AZs
HISTORY = timedelta(days=90)        # how far back AWS keeps Spot price history
_EPOCH = datetime(2020, 1, 1, tzinfo=timezone.utc)


def noise(*key: object) -> float:
    """A uniform number in [0, 1) determined by `key` (stable across processes, unlike hash())."""
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return struct.unpack(">Q", digest)[0] / 2.0**64


def signed_noise(*key: object) -> float:
    return 2.0 * noise(*key) - 1.0


# ----------------------------------------------------------------------------- capacity and scores
def pool_vcpus(seed: int, instance_type: str, zone_id: str, band: str | None) -> float:
    """Spare Spot vCPUs of `instance_type` in one AZ (by AZ id, which is the same in every account)."""
    factor = BAND_CAPACITY.get(band or "", 1.0)
    return POOL_VCPUS * factor * (0.25 + 1.5 * noise(seed, "pool", instance_type, zone_id))


def placement_score(requested: float, available: float, instance_type_count: int) -> int:
    """1..10: how likely a request for `requested` units succeeds against `available` spare units.

    A request for 3% of the spare capacity or less scores 10; one for 160% or more scores 1; in
    between the score falls with the logarithm of the share. With fewer than three instance types
    AWS never scores high, whatever the capacity, and neither does this."""
    if available <= 0:
        return 1
    share = requested / available
    frac = min(1.0, max(0.0, (math.log10(share) + 1.5) / 1.7))
    score = max(1, min(10, round(10 - 9 * frac)))
    if instance_type_count < MIN_TYPES_FOR_GOOD_SCORE:
        score = min(score, LOW_SCORE_CAP)
    return score


# ----------------------------------------------------------------------------- Spot prices
def _offset(seed: int, instance_type: str, az: str) -> timedelta:
    """Pools do not all reprice at the same instant: each has its own phase within the period."""
    return PRICE_PERIOD * noise(seed, "phase", instance_type, az)


def _step_index(t: datetime, offset: timedelta) -> int:
    return math.floor((t - _EPOCH - offset) / PRICE_PERIOD)


def spot_price_changes(seed: int, instance_type: str, az: str, level_usd: float, on_demand_usd: float,
                       start: datetime, end: datetime) -> list[tuple[datetime, float]]:
    """Price changes of one pool, oldest first: the change in force at `start`, then every change up to `end`.

    `level_usd` is the pool's long-run Spot price (On-Demand x (1 - savings)); the price walks around
    it, never above On-Demand and never below a third of the level."""
    offset = _offset(seed, instance_type, az)
    k0, k1 = _step_index(start, offset), _step_index(end, offset)
    az_level = level_usd * (1.0 + AZ_SPREAD * signed_noise(seed, "az", instance_type, az))
    window = [signed_noise(seed, "walk", instance_type, az, k) for k in range(k0 - PRICE_WINDOW + 1, k0 + 1)]
    out = []
    for k in range(k0, k1 + 1):
        if k > k0:
            window.pop(0)
            window.append(signed_noise(seed, "walk", instance_type, az, k))
        price = az_level * (1.0 + PRICE_SWING * sum(window) / math.sqrt(PRICE_WINDOW))
        price = min(on_demand_usd, max(level_usd / 3.0, price))
        out.append((_EPOCH + offset + k * PRICE_PERIOD, round(price, 4)))
    return out
