"""SageMaker training plans as offered: `SearchTrainingPlanOfferings` for training jobs.

A training plan reserves SageMaker capacity of one type and count for a fixed start and duration, paid up front
(SageMaker Developer Guide, "Reserve training plans"; botocore's SearchTrainingPlanOfferings). The sandbox offers
them as it offers EC2 Capacity Blocks (ec2/capacity_blocks.py: the same seeded starts, AZs and fees, steered by the
same `set_capacity_blocks` switch) for the `ml.` types of the block types, each as one offering with one reserved
capacity offering. It sells none: CreateTrainingPlan is not modelled (trainctl does not buy training plans).
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from moto.core.responses import ActionResult
from moto.sagemaker.exceptions import ValidationError
from moto.sagemaker.responses import SageMakerResponse

_ctx: Any = None


def install(ctx: Any) -> None:
    global _ctx
    _ctx = ctx
    SageMakerResponse.search_training_plan_offerings = _search


def _utc(t: Any, default: datetime) -> datetime:
    if t is None:
        return default
    if isinstance(t, (int, float)):
        return datetime.fromtimestamp(float(t), timezone.utc)
    t = t if isinstance(t, datetime) else datetime.fromisoformat(str(t))
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


def _search(self: SageMakerResponse) -> ActionResult:
    from trainctl_sandbox.ec2 import capacity_blocks

    itype, count = self._get_param("InstanceType"), self._get_param("InstanceCount")
    hours, targets = self._get_param("DurationHours"), self._get_param("TargetResources") or []
    if not itype or count is None or hours is None or not targets:
        raise ValidationError("InstanceType, InstanceCount, DurationHours and TargetResources are required here.")
    if int(hours) % 24 or not 24 <= int(hours) <= 182 * 24:
        raise ValidationError(f"DurationHours {hours} is not valid: whole days, 1 to 182 days.")
    now = datetime.now(timezone.utc)
    earliest = _utc(self._get_param("StartTimeAfter"), now)
    latest = _utc(self._get_param("EndTimeBefore"), now + timedelta(weeks=8, hours=int(hours)))
    found = capacity_blocks.offers(_ctx, self.region, itype.removeprefix("ml."), int(count), int(hours), earliest,
                                   latest, now)
    return ActionResult({"TrainingPlanOfferings": [{
        "TrainingPlanOfferingId": "tpo-" + o["CapacityBlockOfferingId"][3:], "TargetResources": list(targets),
        "RequestedStartTimeAfter": earliest, "RequestedEndTimeBefore": latest, "DurationHours": int(hours),
        "DurationMinutes": 0, "UpfrontFee": o["UpfrontFee"], "CurrencyCode": "USD",
        "ReservedCapacityOfferings": [{"InstanceType": itype, "InstanceCount": int(count),
                                       "AvailabilityZone": o["AvailabilityZone"], "DurationHours": int(hours),
                                       "DurationMinutes": 0, "StartTime": o["StartDate"], "EndTime": o["EndDate"]}]}
        for o in found]})
