"""EC2 `DescribeSpotPriceHistory` that looks like AWS's (moto answers one fixed price).

Each pool (type, AZ) has a price around the catalog's Spot level, On-Demand x (1 - savings), that
differs per AZ and changes every few hours (market_model). As on AWS: the price in force at
StartTime is returned too, history goes back 90 days, newest first, and pages by NextToken.
Types without a catalog On-Demand price in the region have no history here.
"""
from __future__ import annotations

import base64
import fnmatch
import json
from collections import OrderedDict
from datetime import datetime, timezone

from trainctl.catalog import load_catalog
from trainctl_sandbox.server import ec2_actions, ec2_data
from trainctl_sandbox.market import model as market_model
from trainctl_sandbox.server.context import SandboxContext
from trainctl_sandbox.server.protocol import AwsError

PRODUCTS = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")  # the same price: VPC is the only kind now
DEFAULT_PAGE = 1000
_CACHE_SIZE = 8  # recent full answers kept so that paging through one does not recompute it


def install(ctx: SandboxContext) -> None:
    ec2_actions.define("DescribeSpotPriceHistory", ctx, describe_spot_price_history)


def reset(ctx: SandboxContext) -> None:
    ctx.state.pop(__name__, None)


def spot_level(region: str, instance_type: str) -> tuple[float, float] | None:
    """(long-run Spot price, On-Demand price) of a type in a region, from the catalog."""
    catalog = load_catalog()
    od = catalog.on_demand_price("ec2", region, instance_type)
    advice = catalog.spot_advice(region, instance_type)
    if od is None or advice is None:
        return None
    return od.usd_per_hour * (1 - advice.savings_pct / 100.0), od.usd_per_hour


def _utc(t: datetime) -> datetime:
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


def _matches(value: str, patterns: list[str] | None) -> bool:
    return not patterns or any(fnmatch.fnmatchcase(value, p) for p in patterns)


def history(ctx: SandboxContext, region: str, start: datetime, end: datetime, types: list[str] | None,
            products: list[str] | None, filters: dict[str, list[str]], az: str | None,
            az_id: str | None = None) -> list[dict]:
    """Every matching price record, newest first."""
    catalog = load_catalog()
    out = []
    for itype in sorted(catalog.instances):
        level = spot_level(region, itype)
        if level is None or (types and itype not in types) or not _matches(itype, filters.get("instance-type")):
            continue
        for az_name, zone_id in ec2_data.zones(region):
            if (az and az_name != az) or (az_id and az_id != zone_id) \
                    or not _matches(az_name, filters.get("availability-zone")):
                continue
            if not ec2_data.offered(itype, region, zone_id):
                continue
            changes = market_model.spot_price_changes(ctx.seed, itype, az_name, level[0], level[1], start, end)
            for product in PRODUCTS:
                if (products and product not in products) or not _matches(product, filters.get("product-description")):
                    continue
                out += [{"AvailabilityZone": az_name, "AvailabilityZoneId": zone_id, "InstanceType": itype,
                         "ProductDescription": product, "SpotPrice": f"{price:.6f}", "Timestamp": ts}
                        for ts, price in changes]
    out.sort(key=lambda p: (-p["Timestamp"].timestamp(), p["AvailabilityZone"], p["InstanceType"],
                            p["ProductDescription"]))
    return out


def describe_spot_price_history(ctx: SandboxContext, r) -> dict:
    now = datetime.now(timezone.utc)
    token = r._get_param("NextToken")
    if token:
        try:
            state = json.loads(base64.urlsafe_b64decode(token.encode()))
            offset, end = int(state["offset"]), datetime.fromisoformat(state["end"])
        except (ValueError, KeyError, TypeError) as e:
            raise AwsError("InvalidParameterValue", f"The NextToken is not valid: {token}") from e
    else:
        offset, end = 0, None
    end_param, start_param = r._get_param("EndTime"), r._get_param("StartTime")
    if end is None:  # a later page keeps the first page's end, so that pages join up without gaps or repeats
        end = min(_utc(end_param), now) if end_param else now
    start = max(_utc(start_param) if start_param else end - market_model.HISTORY, now - market_model.HISTORY)
    if start > end:
        raise AwsError("InvalidParameterValue", "The start time must be before the end time.")
    filters = {f["Name"]: list(f.get("Values") or []) for f in r._get_param("Filters") or []}
    for name in filters:
        if name not in ("availability-zone", "instance-type", "product-description"):
            raise AwsError("InvalidParameterValue", f"The filter '{name}' is invalid")
    types = list(r._get_param("InstanceTypes") or []) or None
    products = list(r._get_param("ProductDescriptions") or []) or None
    az, az_id = r._get_param("AvailabilityZone"), r._get_param("AvailabilityZoneId")
    max_results = int(r._get_param("MaxResults") or DEFAULT_PAGE)
    r.error_on_dryrun()

    key = json.dumps([r.region, start.isoformat(), end.isoformat(), types, products, filters, az, az_id, ctx.seed])
    cache: OrderedDict = ctx.state.setdefault(__name__, OrderedDict())
    records = cache.get(key)
    if records is None:
        records = history(ctx, r.region, start, end, types, products, filters, az, az_id)
        cache[key] = records
        while len(cache) > _CACHE_SIZE:
            cache.popitem(last=False)
    page = records[offset:offset + max_results]
    nxt = None
    if offset + max_results < len(records):
        nxt = base64.urlsafe_b64encode(json.dumps({"offset": offset + max_results,
                                                    "end": end.isoformat()}).encode()).decode()
    return {"SpotPriceHistory": page, "NextToken": nxt}
