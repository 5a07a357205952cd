"""SageMaker training plan offerings for the plan (SearchTrainingPlanOfferings), cached like prices.

A training plan is SageMaker's Capacity Block: N instances of a type for a fixed start and duration, paid up front
(SageMaker Developer Guide, "Reserve training plans"). Asked after a first ranking for the SageMaker On-Demand
layouts of the types AWS reserves (planner/capacity_blocks.BLOCK_TYPES, as `ml.` types), for the shortest duration
that holds the job, starting between now and the deadline (or eight weeks ahead). A failed ask is a warning.
The plans the account already holds (ListTrainingPlans: Scheduled or Active, for training jobs, of the layout's type
with room for its count) are offers too, at no new cost. Buying is `purchase` (CreateTrainingPlan), which only
`launch --buy-capacity-block` calls, after its own confirmation (usecases/launch/capacity_block.py); the plan is
named after the job and carries the job's and the spec's tags, so a later launch of the spec finds it (`held_blocks`)
instead of buying another. Plans are returned in the shape of EC2's Capacity Reservations (CapacityReservationId:
the plan's ARN, StartDate, EndDate, State...), so the launch treats both alike.
"""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

from trainctl.aws import clients as aws
from trainctl.aws.capacity_blocks import MAX_AHEAD, held_as_offers, wanted
from trainctl.aws.disk_cache import DiskCache, cached, caller_account
from trainctl.naming.resources import training_job_name
from trainctl.naming.tags import JOB_TAG, SPEC_TAG
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
    for region, itype, count, _ in asks:  # what the account already holds: asked fresh, never cached
        try:
            held = _held_offers(region, itype, count, now)
        except Exception as e:  # noqa: BLE001 - a failed read is a warning: the offers still stand
            warnings.append(f"{region}: ListTrainingPlans failed ({aws.error_summary(e)}); training plans the "
                            "account holds are not offered")
            continue
        if held:
            found[(region, itype, count)] = held + found.get((region, itype, count), ())
    return replace(quotes, training_plans={**quotes.training_plans, **found}, warnings=quotes.warnings + tuple(warnings))


def _held_offers(region: str, itype: str, count: int, now: datetime) -> tuple[BlockOffer, ...]:
    """The plans of `itype` the account holds with room for `count` instances, as offers whose fee is paid."""
    return held_as_offers(held_blocks(region, itype), count, now)


def _as_reservation(plan: dict) -> dict | None:
    """A training plan in the shape of an EC2 Capacity Reservation (one reserved capacity: its type and AZ)."""
    caps = plan.get("ReservedCapacitySummaries") or [{}]
    itype = str(caps[0].get("InstanceType", "")).removeprefix("ml.")
    if not itype or not plan.get("StartTime") or not plan.get("EndTime"):
        return None
    return {"CapacityReservationId": plan["TrainingPlanArn"], "InstanceType": itype,
            "AvailabilityZone": caps[0].get("AvailabilityZone", ""), "State": str(plan["Status"]).lower(),
            "StartDate": plan["StartTime"].astimezone(timezone.utc), "EndDate": plan["EndTime"].astimezone(timezone.utc),
            "TotalInstanceCount": int(plan.get("TotalInstanceCount") or 0),
            "AvailableInstanceCount": int(plan.get("AvailableInstanceCount") or 0), "Name": plan["TrainingPlanName"]}


HELD_STATES = ("Active", "Scheduled")   # a training job can use a plan in these (Developer Guide)


def held_blocks(region: str, instance_type: str, spec_name: str | None = None) -> list[dict]:
    """The account's training plans for training jobs of `instance_type` in `region` that are Scheduled or Active
    (with the spec's tag when `spec_name` is given, read with ListTags), as Capacity Reservations."""
    sm, out, kwargs = aws.client("sagemaker", region), [], {"MaxResults": 100}
    for _ in range(10):  # bounded pages whatever the endpoint says
        page = sm.list_training_plans(**kwargs)
        for plan in page.get("TrainingPlanSummaries", []):
            held = _as_reservation(plan) if plan.get("Status") in HELD_STATES and "training-job" in (
                plan.get("TargetResources") or ["training-job"]) else None
            if held is None or held["InstanceType"] != instance_type:
                continue
            if spec_name is not None and {"Key": SPEC_TAG, "Value": spec_name} not in sm.list_tags(
                    ResourceArn=plan["TrainingPlanArn"]).get("Tags", []):
                continue
            out.append(held)
        if not page.get("NextToken"):
            break
        kwargs["NextToken"] = page["NextToken"]
    return out


def purchase_params(offering_id: str, job_id: str, spec_name: str) -> dict:
    """CreateTrainingPlan's request: named after the job (a plan name is unique in the account and Region, so a
    retried purchase cannot buy a second plan), with the job's and the spec's tags."""
    return {"TrainingPlanName": training_job_name(job_id), "TrainingPlanOfferingId": offering_id,
            "Tags": [{"Key": JOB_TAG, "Value": job_id}, {"Key": SPEC_TAG, "Value": spec_name}]}


def purchase(region: str, params: dict) -> dict:
    """Buy the offering (cannot be undone): the training plan it becomes, as a Capacity Reservation."""
    sm = aws.client("sagemaker", region)
    sm.create_training_plan(**params)
    plan = sm.describe_training_plan(TrainingPlanName=params["TrainingPlanName"])
    held = _as_reservation(plan)
    if held is None:
        raise RuntimeError(f"training plan {params['TrainingPlanName']} was bought but DescribeTrainingPlan shows no "
                           "reserved capacity yet")
    return held


OPERATION = "sagemaker:CreateTrainingPlan"
