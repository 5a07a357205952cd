"""What a sandbox SageMaker managed Spot job is billed: its billable seconds follow the sandbox's own Spot
price history.

SageMaker reports managed Spot savings through BillableTimeInSeconds: "You can calculate the savings from
using managed spot training using the formula (1 - BillableTimeInSeconds / TrainingTimeInSeconds) * 100"
(SageMaker API Reference, DescribeTrainingJob, BillableTimeInSeconds). The job is billed at the On-Demand
rate for the billable seconds, so the Spot discount is in the seconds. Here each billed stretch of a Spot job
(instances up, between Spot interruptions) counts as its length x the EC2 Spot price in force / the EC2
On-Demand price of the instance type (the price history that DescribeSpotPriceHistory answers, spot_prices.py),
the same discount trainctl's plan applies to SageMaker's On-Demand price.

Where: the AZ of the job's first subnet; a job outside a VPC is placed by SageMaker, and here it runs in the
region's AZ with the lowest Spot price when it starts.
"""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

from trainctl.catalog import load_catalog
from trainctl_sandbox.market import model as market_model
from trainctl_sandbox.market.cost_explorer import Usage, epoch


def _changes(seed: int, itype: str, az: str, start: float, end: float) -> list[tuple[float, float]]:
    from trainctl_sandbox.market import spot_prices  # moto's EC2, imported off the server's start-up path

    level = spot_prices.spot_level(az[:-1], itype)
    if level is None:
        return []
    points = market_model.spot_price_changes(seed, itype, az, level[0], level[1],
                                             datetime.fromtimestamp(start, timezone.utc),
                                             datetime.fromtimestamp(end, timezone.utc))
    return [(t.timestamp(), price / level[1]) for t, price in points]


def _mean(points: list[tuple[float, float]], start: float, end: float) -> float:
    """The time-weighted mean of a step function over [start, end] (its value at start when end <= start)."""
    value = next((v for t, v in reversed(points) if t <= start), points[0][1])
    if end <= start:
        return value
    total, t0 = 0.0, start
    for t, v in points:
        if start < t < end:
            total += (t - t0) * value
            t0, value = t, v
    return (total + (end - t0) * value) / (end - start)


def billed_fraction(seed: int, region: str, instance_type: str, azs: list[str | None],
                    at: float) -> Callable[[float, float], float]:
    """A function (start, end) -> the fraction of On-Demand a Spot stretch of the job costs; 1.0 for a type
    without Spot prices here (billed as On-Demand, as the sandbox cannot say better)."""
    from trainctl_sandbox.server import ec2_data

    itype = instance_type.removeprefix("ml.")
    zones = [az for az in azs if az] or [name for name, _ in ec2_data.zones(region)]
    priced = [(az, pts) for az in zones if (pts := _changes(seed, itype, az, at, at))]
    if not priced:
        return lambda start, end: 1.0
    az = min(priced, key=lambda p: p[1][-1][1])[0] if not any(azs) else priced[0][0]
    return lambda start, end: _mean(_changes(seed, itype, az, start, max(start, end)), start, end)


def spot_rate(seed: int, region: str, request: dict, azs: list[str | None]) -> Callable[[float, float], float] | None:
    """`billed_fraction` of a CreateTrainingJob request from now, or None for a job without managed Spot."""
    import time

    if not request.get("EnableManagedSpotTraining"):
        return None
    return billed_fraction(seed, region, (request.get("ResourceConfig") or {}).get("InstanceType", ""), azs,
                           time.time())


def training_usage(jobs: dict) -> list[Usage]:
    """What Cost Explorer bills for the jobs (registered by jobs.py): an ended job's BillableTimeInSeconds x
    instance count x the catalog's SageMaker On-Demand price, spread evenly over its training time. A job on a training
    plan bills nothing more: the plan's fee was its price ("Reserve training plans": paid up front)."""
    out: list[Usage] = []
    catalog = load_catalog()
    for (_, region, _), job in list(jobs.items()):
        d = job.describe()
        if not d.get("BillableTimeInSeconds") or not d.get("TrainingStartTime") or not d.get("TrainingEndTime"):
            continue  # billed once it has ended, as DescribeTrainingJob reports billable seconds
        rc = d["ResourceConfig"]
        if rc.get("TrainingPlanArn"):
            continue  # its instances are the training plan's, paid up front when the plan was bought
        price = catalog.on_demand_price("sagemaker", region, rc["InstanceType"].removeprefix("ml."))
        total = d["BillableTimeInSeconds"] / 3600 * (price.usd_per_hour if price else 0.0) * rc["InstanceCount"]
        start, end = epoch(d["TrainingStartTime"]), epoch(d["TrainingEndTime"])
        span = max(end - start, 1e-9)
        rate = (lambda a, b, t=total, s=span: max(0.0, b - a) / s * t)
        out.append(({t["Key"]: t["Value"] for t in job.tags}, "sagemaker", start, end, rate))
    return out
