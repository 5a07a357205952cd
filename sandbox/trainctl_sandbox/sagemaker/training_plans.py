"""SageMaker training plans: offered, sold once, held for the buyer between their start and end, ended.

A training plan reserves SageMaker capacity of one type and count for a fixed start and duration, paid up front
(SageMaker Developer Guide, "Reserve training plans"; botocore's SearchTrainingPlanOfferings, CreateTrainingPlan,
DescribeTrainingPlan, ListTrainingPlans; docs/aws-rules.md). The sandbox offers them as it offers EC2 Capacity Blocks
(ec2/capacity_blocks.py: the same seeded starts, AZs and fees, steered by the same `set_capacity_blocks` switch) for
the `ml.` types of the block types, each as one offering with one reserved capacity offering.
- CreateTrainingPlan sells an offering once, to this account and Region; the plan is Scheduled before its start,
  Active until its end, then Expired (each read from the clock, as the Developer Guide's "View training plan details"
  lists them); its tags are read back with ListTags on its ARN.
- A training job naming the plan (ResourceConfig.TrainingPlanArn) is refused unless the plan is this account's, for
  training jobs, Scheduled or Active, of the job's instance type and with room for its count ("Training plans
  utilization for SageMaker training jobs": the plan must be Scheduled or Active; the job's InstanceType must match
  the plan's). Such a job stays Pending until the plan is Active (jobs/runner: `wait_for_plan`), and SageMaker
  terminates its instances from 30 minutes before the plan's end (`reclaim_at`).
Admin actions: `training_plans` (what each account bought), `start_training_plan` {"plan"} (time passes: it starts
now), `end_training_plan` {"plan", "in_seconds"?} (its end comes now, or that many seconds from now).
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

from moto.core.responses import ActionResult
from moto.sagemaker.exceptions import ResourceInUseException, ResourceNotFound, ValidationError
from moto.sagemaker.responses import SageMakerResponse

_ctx: Any = None
NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}$")   # botocore: TrainingPlanName
RECLAIM_BEFORE_END = timedelta(minutes=30)
MAX_PENDING = timedelta(days=2)  # a job pending for capacity this long ends with InsufficientCapacityError


def install(ctx: Any) -> None:
    global _ctx
    _ctx = ctx
    SageMakerResponse.search_training_plan_offerings = _search
    SageMakerResponse.create_training_plan = _create
    SageMakerResponse.describe_training_plan = _describe
    SageMakerResponse.list_training_plans = _list
    if not getattr(SageMakerResponse, "_trainctl_plan_tags", False):
        moto_list_tags = SageMakerResponse.list_tags

        def list_tags(self: SageMakerResponse):
            plan = _by_arn(self.current_account, self.region, self._get_param("ResourceArn") or "")
            return ActionResult({"Tags": list(plan["Tags"])}) if plan else moto_list_tags(self)
        SageMakerResponse.list_tags = list_tags
        SageMakerResponse._trainctl_plan_tags = True


def _state(ctx: Any = None) -> dict:
    return (ctx or _ctx).state.setdefault(__name__, {"offers": {}, "plans": {}})


def reset(ctx: Any) -> None:
    ctx.state.pop(__name__, None)


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
    out = []
    for o in found:
        offering = {
            "TrainingPlanOfferingId": "tpo-" + o["CapacityBlockOfferingId"][3:], "TargetResources": list(targets),
            "RequestedStartTimeAfter": earliest, "RequestedEndTimeBefore": latest, "DurationHours": int(hours),
            "DurationMinutes": 0, "UpfrontFee": o["UpfrontFee"], "CurrencyCode": "USD",
            "ReservedCapacityOfferings": [{"InstanceType": itype, "InstanceCount": int(count),
                                           "AvailabilityZone": o["AvailabilityZone"], "DurationHours": int(hours),
                                           "DurationMinutes": 0, "StartTime": o["StartDate"],
                                           "EndTime": o["EndDate"]}]}
        _state()["offers"][offering["TrainingPlanOfferingId"]] = dict(offering, Region=self.region)
        out.append(offering)
    return ActionResult({"TrainingPlanOfferings": out})


# ----------------------------------------------------------------------------- selling and reading plans
def _create(self: SageMakerResponse) -> ActionResult:
    name, oid = self._get_param("TrainingPlanName") or "", self._get_param("TrainingPlanOfferingId") or ""
    if not NAME_RE.match(name):
        raise ValidationError(f"1 validation error detected: Value '{name}' at 'trainingPlanName' failed to satisfy "
                              "constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}")
    state, account, region = _state(), self.current_account, self.region
    offer = state["offers"].get(oid)
    if offer is None or offer["Region"] != region:
        raise ResourceNotFound(f"Training plan offering {oid} not found.")
    plans = state["plans"].setdefault(account, [])
    if any(p["TrainingPlanName"] == name and p["Region"] == region for p in plans):
        raise ResourceInUseException(f"Training plan {name} already exists.")
    capacity = offer["ReservedCapacityOfferings"][0]
    arn = f"arn:aws:sagemaker:{region}:{account}:training-plan/{name}"
    plans.append({"TrainingPlanArn": arn, "TrainingPlanName": name, "Region": region,
                  "StartTime": capacity["StartTime"], "EndTime": capacity["EndTime"],
                  "DurationHours": offer["DurationHours"], "DurationMinutes": 0, "UpfrontFee": offer["UpfrontFee"],
                  "CurrencyCode": "USD", "TotalInstanceCount": int(capacity["InstanceCount"]),
                  "InstanceType": capacity["InstanceType"], "AvailabilityZone": capacity["AvailabilityZone"],
                  "TargetResources": list(offer["TargetResources"]), "Tags": list(self._get_param("Tags") or []),
                  "Jobs": []})
    del state["offers"][oid]   # an offering is sold once
    return ActionResult({"TrainingPlanArn": arn})


def status(plan: dict, now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    return "Scheduled" if now < plan["StartTime"] else "Active" if now < plan["EndTime"] else "Expired"


def _in_use(plan: dict) -> int:
    return sum(count for job, count in plan["Jobs"] if not job.state.ended)


def _view(plan: dict) -> dict:
    used = _in_use(plan)
    state = status(plan)
    return {**{k: v for k, v in plan.items() if k not in ("Region", "Tags", "Jobs", "InstanceType",
                                                           "AvailabilityZone")},
            "Status": state, "InUseInstanceCount": used,
            "AvailableInstanceCount": plan["TotalInstanceCount"] - used if state == "Active" else 0,
            "ReservedCapacitySummaries": [{
                "ReservedCapacityArn": plan["TrainingPlanArn"].replace(":training-plan/", ":reserved-capacity/"),
                "InstanceType": plan["InstanceType"], "TotalInstanceCount": plan["TotalInstanceCount"],
                "Status": state, "AvailabilityZone": plan["AvailabilityZone"], "DurationHours": plan["DurationHours"],
                "DurationMinutes": 0, "StartTime": plan["StartTime"], "EndTime": plan["EndTime"]}]}


def _mine(account: str, region: str) -> list[dict]:
    return [p for p in _state()["plans"].get(account, []) if p["Region"] == region]


def _by_arn(account: str, region: str, arn: str) -> dict | None:
    return next((p for p in _mine(account, region) if p["TrainingPlanArn"] == arn), None)


def _describe(self: SageMakerResponse) -> ActionResult:
    name = self._get_param("TrainingPlanName")
    plan = next((p for p in _mine(self.current_account, self.region) if p["TrainingPlanName"] == name), None)
    if plan is None:
        raise ResourceNotFound(f"Training plan {name} not found.")
    return ActionResult(_view(plan))


def _list(self: SageMakerResponse) -> ActionResult:
    plans = [_view(p) for p in _mine(self.current_account, self.region)]
    for f in self._get_param("Filters") or []:
        if f.get("Name") != "Status":
            raise ValidationError(f"Filter name {f.get('Name')} is not valid: Status.")
        plans = [p for p in plans if p["Status"] == f.get("Value")]
    after, before = self._get_param("StartTimeAfter"), self._get_param("StartTimeBefore")
    far = datetime.max.replace(tzinfo=timezone.utc)
    plans = [p for p in plans if _utc(after, p["StartTime"]) <= p["StartTime"] <= _utc(before, far)]
    plans.sort(key=lambda p: p[self._get_param("SortBy") or "StartTime"],
               reverse=(self._get_param("SortOrder") or "Ascending") == "Descending")
    start = int(self._get_param("NextToken") or 0)
    size = int(self._get_param("MaxResults") or 100)
    out: dict = {"TrainingPlanSummaries": plans[start:start + size]}
    if start + size < len(plans):
        out["NextToken"] = str(start + size)
    return ActionResult(out)


# ----------------------------------------------------------------------------- training jobs on a plan
def check_job(request: dict, account: str, region: str) -> dict | None:
    """The plan a CreateTrainingJob names, once its rules hold; None without one. Refused: a plan that is not this
    account's (ResourceNotFound), not for training jobs, not Scheduled or Active, of another instance type, or
    without room for the job's count (ValidationException; the conditions are AWS's, the wording the sandbox's)."""
    resource = request.get("ResourceConfig") or {}
    arn = resource.get("TrainingPlanArn")
    if not arn:
        return None
    plan = _by_arn(account, region, arn)
    if plan is None:
        raise ResourceNotFound(f"Training plan {arn} not found.")
    if "training-job" not in plan["TargetResources"]:
        raise ValidationError(f"Training plan {plan['TrainingPlanName']} is not for training jobs.")
    if status(plan) not in ("Scheduled", "Active"):
        raise ValidationError(f"Training plan {plan['TrainingPlanName']} is {status(plan)}: a training job can use a "
                              "plan that is Scheduled or Active.")
    if resource.get("InstanceType") != plan["InstanceType"]:
        raise ValidationError(f"The InstanceType {resource.get('InstanceType')} does not match the training plan's "
                              f"InstanceType {plan['InstanceType']}.")
    count, free = int(resource.get("InstanceCount", 1)), plan["TotalInstanceCount"] - _in_use(plan)
    if count > free:
        raise ValidationError(f"Training plan {plan['TrainingPlanName']} has {free} instances available; the job asks "
                              f"for {count}.")
    if request.get("EnableManagedSpotTraining"):
        raise ValidationError("A training job on a training plan runs on its reserved capacity: "
                              "EnableManagedSpotTraining must be false.")
    return plan


def of_job(request: dict, account: str, region: str) -> dict | None:
    """The plan a created job runs on (check_job accepted it), or None."""
    arn = (request.get("ResourceConfig") or {}).get("TrainingPlanArn")
    return _by_arn(account, region, arn) if arn else None


def hold(plan: dict, job: Any, count: int) -> None:
    """The job's instances count against the plan until it ends (its place then comes back)."""
    plan["Jobs"].append((job, count))


def wait_words(plan: dict) -> str:
    return f"Waiting for training plan {plan['TrainingPlanName']} to become Active at {plan['StartTime'].isoformat()}"


def reclaim_at(plan: dict) -> float:
    """When SageMaker begins terminating the plan's instances (epoch seconds): 30 minutes before its end."""
    return (plan["EndTime"] - RECLAIM_BEFORE_END).timestamp()


def environment(plan: dict) -> dict[str, str]:
    """What the container sees of the plan: its end in epoch milliseconds ("Training plans utilization for SageMaker
    training jobs": SAGEMAKER_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP)."""
    return {"SAGEMAKER_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP": str(int(plan["EndTime"].timestamp() * 1000))}


# ----------------------------------------------------------------------------- admin
def _named(payload: dict) -> dict:
    name = payload.get("plan") or payload.get("name")  # "plan": SandboxAdmin.action(name, **payload) takes "name"
    found = [p for ps in _state()["plans"].values() for p in ps if p["TrainingPlanName"] == name]
    if not found:
        raise ValueError(f"no bought training plan {name!r}")
    return found[0]


def training_plans(ctx: Any, payload: dict) -> dict:
    return {"bought": {a: [{**{k: v for k, v in p.items() if k != "Jobs"}, "StartTime": p["StartTime"].isoformat(),
                            "EndTime": p["EndTime"].isoformat(), "Status": status(p)} for p in ps]
                       for a, ps in _state(ctx)["plans"].items()}}


def start_training_plan(ctx: Any, payload: dict) -> dict:
    """Time passes for one plan: its start moves to now, its end by as much."""
    plan = _named(payload)
    shift = datetime.now(timezone.utc).replace(microsecond=0) - plan["StartTime"]
    plan["StartTime"], plan["EndTime"] = plan["StartTime"] + shift, plan["EndTime"] + shift
    return {"StartTime": plan["StartTime"].isoformat(), "EndTime": plan["EndTime"].isoformat()}


def end_training_plan(ctx: Any, payload: dict) -> dict:
    """The plan's end comes now (or in `in_seconds`): its jobs' instances are terminated from 30 minutes before."""
    plan = _named(payload)
    now = datetime.now(timezone.utc).replace(microsecond=0)
    plan["EndTime"] = now + timedelta(seconds=float(payload.get("in_seconds") or 0))
    plan["StartTime"] = min(plan["StartTime"], now - timedelta(hours=1))
    return {"EndTime": plan["EndTime"].isoformat()}


ADMIN_ACTIONS = {"training_plans": training_plans, "start_training_plan": start_training_plan,
                 "end_training_plan": end_training_plan}
