"""SageMaker training plan offerings for the plan (SearchTrainingPlanOfferings), cached like prices.

A training plan is SageMaker's Capacity Block: N instances of a type for a fixed start and duration, paid up front
(SageMaker Developer Guide, "Reserve training plans"). Asked after a first ranking for the SageMaker On-Demand
layouts of the types AWS reserves (planner/capacity_blocks.BLOCK_TYPES, as `ml.` types), for the shortest duration
that holds the job, starting between now and the deadline (or eight weeks ahead). A failed ask is a warning.
trainctl offers them in the plan only: it does not buy one (usecases/launch/capacity_block.py says so).
"""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

from trainctl.aws import clients as aws
from trainctl.aws.capacity_blocks import MAX_AHEAD, wanted
from trainctl.aws.disk_cache import DiskCache, cached, caller_account
from trainctl.planner.quotes import BlockOffer, Quotes
from trainctl.plans import Option


def _offerings(region: str, itype: str, count: int, hours: int, start: datetime, end: datetime) -> list[dict]:
    page = aws.client("sagemaker", region).search_training_plan_offerings(
        InstanceType=f"ml.{itype}", InstanceCount=count, DurationHours=hours, StartTimeAfter=start,
        EndTimeBefore=end, TargetResources=["training-job"])
    out = []
    for o in page.get("TrainingPlanOfferings", []):
        cap = (o.get("ReservedCapacityOfferings") or [{}])[0]
        if o.get("CurrencyCode", "USD") != "USD" or not cap.get("StartTime"):
            continue
        out.append({"id": o["TrainingPlanOfferingId"], "az": cap.get("AvailabilityZone", ""),
                    "count": int(cap.get("InstanceCount", count)),
                    "start": cap["StartTime"].astimezone(timezone.utc).isoformat(),
                    "end": cap["EndTime"].astimezone(timezone.utc).isoformat(),
                    "hours": int(o.get("DurationHours") or 0) + int(o.get("DurationMinutes") or 0) / 60,
                    "fee": float(o["UpfrontFee"])})
    return out


def with_training_plan_offers(quotes: Quotes, ranking: list[Option], deadline_hours: float | None,
                              refresh: bool = False, now: datetime | None = None) -> Quotes:
    """`quotes` with the training plan offers of the ranking's SageMaker layouts AWS reserves."""
    asks = wanted(ranking, "sagemaker")
    if not asks:
        return quotes
    now = now or datetime.now(timezone.utc)
    latest_start = now + (min(timedelta(hours=deadline_hours), MAX_AHEAD) if deadline_hours else MAX_AHEAD)
    try:
        cache = DiskCache(caller_account(asks[0][0]), refresh=refresh)
    except Exception:  # noqa: BLE001 - without the account there is no cache to share
        cache = DiskCache("", ttl_s=0)
    found: dict[tuple[str, str, int], tuple[BlockOffer, ...]] = {}
    warnings: list[str] = []
    for region, itype, count, hours in asks:
        key = {"op": "training-plans", "region": region, "type": itype, "count": count, "hours": hours,
               "hour": now.strftime("%Y-%m-%dT%H"), "deadline": deadline_hours}
        try:
            raw = cached(cache, key, lambda: _offerings(region, itype, count, hours, now,
                                                        latest_start + timedelta(hours=hours)))
        except Exception as e:  # noqa: BLE001 - a failed ask is a warning: the plan keeps its other options
            warnings.append(f"{region}: SearchTrainingPlanOfferings for {count} x ml.{itype} failed "
                            f"({aws.error_summary(e)}); no training plan is offered there")
            continue
        offers = tuple(BlockOffer(offering_id=o["id"], availability_zone=o["az"], instance_count=o["count"],
                                  start=o["start"], end=o["end"], duration_hours=o["hours"],
                                  wait_hours=max(0.0, (datetime.fromisoformat(o["start"]) - now).total_seconds() / 3600),
                                  upfront_fee_usd=o["fee"]) for o in raw)
        if offers:
            found[(region, itype, count)] = offers
    return replace(quotes, training_plans={**quotes.training_plans, **found}, warnings=quotes.warnings + tuple(warnings))
