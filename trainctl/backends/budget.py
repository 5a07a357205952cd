"""The job's budget (`constraints.budget_usd`) at launch, for both platforms (docs/cost-model.md).

- EC2: the node agent enforces it (bootstrap/budget.py); the launch gives it the budget and the price per node.
- SageMaker: `StoppingCondition.MaxRuntimeInSeconds` bounds the run at the budget's hours at SageMaker's
  On-Demand price of the layout. SageMaker bills BillableTimeInSeconds at that price (a managed Spot job's
  billable seconds are at most its training seconds, its discount is in the seconds), and MaxRuntime bounds the
  training seconds of all attempts together (SageMaker API Reference, StoppingCondition), so the bill stays
  within the budget with nobody watching. For managed Spot the bound is conservative (the discount is not
  counted in advance). At MaxRuntime SageMaker stops the job with SIGTERM and 120 s to save a checkpoint.
"""
from __future__ import annotations

from trainctl.backends.launch_limits import MAX_SECONDS


def node_config(spec, option, notify: str | None = None) -> dict:
    """config.json's budget entries for the EC2 node agent (none without a budget), and the SNS topic it sends
    the budget's news to (a webhook is sent by `watch` only: its URL never goes into user data)."""
    budget = spec.constraints.budget_usd
    out = {"notify_topic": notify} if notify and notify.startswith("arn:") else {}
    if not budget:
        return out
    by_type = node_prices(option)
    # the agent counts every node at one price: the dearest type the fleet may launch, never the plan's cheapest
    return {**out, "budget_usd": float(budget), "node_hourly_usd": max(by_type.values()),  # >= the plan's own
            "node_hourly_by_type": by_type}


def node_prices(option) -> dict[str, float]:
    """$/h per node of each type the layout may launch. The plan priced its `instance_type` (at its Spot price
    for Spot); a flexible layout's other types are priced at the same share of their own On-Demand price (the
    catalog's), so a fleet that launches a $1.624/h type is counted at it, not at the $0.589/h the plan chose."""
    from trainctl.catalog import load_catalog

    per_node = round(option.hourly_usd / option.count, 6)
    types = tuple(option.instance_types) or (option.instance_type,)
    catalog = load_catalog()

    def od(t: str) -> float | None:
        price = catalog.on_demand_price("ec2", option.region, t)
        return price.usd_per_hour if price else None

    base = od(option.instance_type)
    out = {option.instance_type: per_node}
    for t in types:
        if t != option.instance_type:
            own = od(t)
            out[t] = max(per_node, round(per_node * own / base, 6)) if own and base and own > base else per_node
    return out


def sagemaker_runtime(stopping: dict, spec, option, region: str, notes: list[str]) -> dict:
    """`stopping` with MaxRuntimeInSeconds no longer than the budget's hours at the On-Demand price."""
    budget = spec.constraints.budget_usd
    hourly = sagemaker_hourly(region, option.instance_type, option.count) or option.hourly_usd
    if not budget or not hourly:
        return stopping
    bound = budget_seconds(budget, hourly)
    if bound < stopping["MaxRuntimeInSeconds"]:
        notes.append(f"budget ${budget:g}: MaxRuntimeInSeconds {bound} (the budget's hours at ${hourly:.4g}/h "
                     "On-Demand); SageMaker stops the job there, with 120 s to checkpoint")
        return {**stopping, "MaxRuntimeInSeconds": bound}
    return stopping



def sagemaker_hourly(region: str, instance_type: str, count: int) -> float | None:
    """The layout's SageMaker On-Demand $/h from the catalog (None when it has no price)."""
    from trainctl.catalog import load_catalog

    price = load_catalog().on_demand_price("sagemaker", region, instance_type.removeprefix("ml."))
    return price.usd_per_hour * count if price else None


def budget_seconds(budget: float, hourly: float) -> int:
    """The budget's hours at `hourly`, as MaxRuntimeInSeconds (1 s to SageMaker's 28 days)."""
    return max(1, min(MAX_SECONDS, int(budget / hourly * 3600)))


def stopped_by_budget(view, budget: float | None) -> str | None:
    """Why a SageMaker job stopped at MaxRuntime, when that MaxRuntime was its budget's bound (else None)."""
    raw = view.raw or {}
    if not budget or view.platform != "sagemaker" or view.secondary_status != "MaxRuntimeExceeded":
        return None
    hourly = sagemaker_hourly(view.region, view.instance_type or "", view.count or 1)
    limit = (raw.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds")
    if not hourly or limit != budget_seconds(budget, hourly):
        return None
    return f"stopped: budget ${budget:g} reached (MaxRuntimeInSeconds {limit}: the budget's hours at ${hourly:.4g}/h)"
