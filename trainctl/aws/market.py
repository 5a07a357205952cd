"""Live market data: Spot placement scores, Spot price history, On-Demand prices, service quotas.

All regions and calls run concurrently. A call that fails is data, not an exception: it becomes a
warning, and a region whose EC2 market data cannot be read drops out of the plan. On-Demand prices
fall back to the catalog; unknown quotas are simply not checked. Answers are cached on disk briefly
(TRAINCTL_CACHE_TTL seconds, default 600) so re-planning does not re-ask AWS.
"""
from __future__ import annotations

import json
import time
from trainctl.aws.workers import interruptible_pool
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone

from trainctl.aws import clients as aws
from trainctl.aws import placement
from trainctl.aws.disk_cache import DiskCache, cached, caller_account  # noqa: F401 - the plan's entry points
from trainctl.aws.placement import placement_scores_for  # noqa: F401 - launch and doctor read the plan's scores
from trainctl.catalog import Catalog
from trainctl.catalog.platforms import facts as platform_facts
from trainctl.planner.quotes import Quotes, SpotPrice

DEFAULT_WINDOW_HOURS = 7 * 24


@dataclass(frozen=True)
class MarketRequest:
    regions: tuple[str, ...]
    instance_types: tuple[str, ...]          # plain names
    spot_counts: dict[str, tuple[int, ...]]  # instance type -> node counts wanted on Spot
    platforms: tuple[str, ...]
    markets: tuple[str, ...]
    window_hours: float = DEFAULT_WINDOW_HOURS
    # flexible layouts on Spot: their set of types (sorted) -> node counts; each (set, count) is one placement-score
    # configuration, asked exactly as the launch's fleet is made (sets of fewer than three types are not asked)
    flexible_sets: dict[tuple[str, ...], tuple[int, ...]] = field(default_factory=dict)


# ----------------------------------------------------------------------------- per-call fetchers
def _availability_zones(region: str) -> dict[str, str]:
    """AZ id (use1-az4) -> AZ name (us-east-1a) for this account: the mapping differs per account."""
    from trainctl.aws import zones

    return zones.az_ids_to_names(aws.client("ec2", region))


def _spot_price_history(region: str, types: list[str], window_hours: float) -> dict[str, dict[str, dict]]:
    """type -> AZ name -> {mean, latest}: time-weighted mean over the window and the price in force now."""
    end = datetime.now(timezone.utc)
    start = end - timedelta(hours=window_hours)
    ec2 = aws.client("ec2", region)
    points: dict[tuple[str, str], list[tuple[float, float]]] = {}
    paginator = ec2.get_paginator("describe_spot_price_history")
    for page in paginator.paginate(InstanceTypes=types, ProductDescriptions=["Linux/UNIX"],
                                   StartTime=start, EndTime=end):
        for p in page.get("SpotPriceHistory", []):
            ts = p["Timestamp"].timestamp()
            points.setdefault((p["InstanceType"], p["AvailabilityZone"]), []).append((ts, float(p["SpotPrice"])))
    out: dict[str, dict[str, dict]] = {}
    for (itype, az), pts in points.items():
        mean, latest = time_weighted_mean(pts, start.timestamp(), end.timestamp())
        out.setdefault(itype, {})[az] = {"mean": mean, "latest": latest}
    return out


def time_weighted_mean(points: list[tuple[float, float]], start: float, end: float) -> tuple[float, float]:
    """Mean of a step function (each price holds until the next change) over [start, end], and the last price.

    AWS returns the price in force at StartTime with its earlier timestamp, so a point before `start`
    counts from `start`."""
    pts = sorted(points)
    total = weighted = 0.0
    for i, (ts, price) in enumerate(pts):
        seg_start = max(ts, start)
        seg_end = min(pts[i + 1][0] if i + 1 < len(pts) else end, end)
        if seg_end > seg_start:
            weighted += price * (seg_end - seg_start)
            total += seg_end - seg_start
    latest = pts[-1][1]
    return (weighted / total if total > 0 else latest), latest


def _on_demand_price(service: str, region: str, instance_type: str) -> float | None:
    pricing = aws.client("pricing", aws.PRICING_REGION)
    if service == "AmazonEC2":
        attrs = {"instanceType": instance_type, "regionCode": region, "operatingSystem": "Linux",
                 "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}
    else:
        attrs = {"instanceName": f"ml.{instance_type}", "regionCode": region, "component": "Training"}
    filters = [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in attrs.items()]
    resp = pricing.get_products(ServiceCode=service, Filters=filters, FormatVersion="aws_v1", MaxResults=10)
    for item in resp.get("PriceList", []):
        doc = json.loads(item) if isinstance(item, str) else item
        for term in doc.get("terms", {}).get("OnDemand", {}).values():
            for dim in term.get("priceDimensions", {}).values():
                usd = float(dim.get("pricePerUnit", {}).get("USD", "0") or 0)
                if usd > 0:
                    return usd
    return None


def _quotas(region: str, service_code: str, wanted: set[str]) -> dict[str, dict]:
    """{"values": quota values by QuotaCode (ec2) or QuotaName (sagemaker), "codes": the QuotaCode of each (the
    increase request needs it)}. ListServiceQuotas leaves out quotas that have no applied value (botocore
    docstring); an EC2 code it leaves out is read with GetAWSDefaultServiceQuota."""
    sq = aws.client("service-quotas", region)
    field = "QuotaCode" if service_code == "ec2" else "QuotaName"
    found: dict[str, float] = {}
    codes: dict[str, str] = {}
    for page in sq.get_paginator("list_service_quotas").paginate(ServiceCode=service_code):
        for q in page.get("Quotas", []):
            if q.get(field) in wanted:
                found[q[field]] = float(q["Value"])
                codes[q[field]] = q.get("QuotaCode", "")
    if service_code == "ec2":
        for code in sorted(wanted - set(found)):
            found[code] = float(sq.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"])
            codes[code] = code
    return {"values": found, "codes": codes}


# ----------------------------------------------------------------------------- the whole fetch
def fetch_quotes(catalog: Catalog, req: MarketRequest, cache: DiskCache) -> Quotes:
    """Live quotes for every region of the request, asked concurrently. A failed call is a warning and never
    costs more than what it was asked for: a refused placement-score call (no permission, or the account's
    daily configuration budget spent: MaxConfigLimitExceeded) leaves that region's Spot options with an
    unknown score, a failed price-history call leaves them priced from the Spot advisor; only a region whose
    AZs cannot be listed is left out."""
    with interruptible_pool(16) as pool:
        jobs = _submit_all(pool, cache, catalog, req)
        results: dict[tuple, object] = {}
        errors: dict[tuple, BaseException] = {}
        for key, fut in jobs.items():
            try:
                results[key] = fut.result()
            except Exception as e:  # noqa: BLE001 - every failure becomes a warning, by design
                errors[key] = e
    quotes = _assemble(catalog, req, results, errors)
    return replace(quotes, warnings=quotes.warnings + _cache_ages(cache))


def _cache_ages(cache: DiskCache) -> tuple[str, ...]:
    """Say when market data came from the cache, and how old it is: a quota raised a minute ago would otherwise
    still read as the old value for up to TRAINCTL_CACHE_TTL seconds."""
    what = {"quota": "Service Quotas", "price": "On-Demand prices", "spot": "Spot price history",
            "score": "placement scores"}  # AZ names do not change: not worth a word
    ages = sorted(((what[op], age) for op, age in cache.ages.items() if op in what), key=lambda kv: -kv[1])
    if not ages:
        return ()
    named = ", ".join(f"{name} {_age(age)} old" for name, age in ages)
    return (f"cached answers (kept {cache.ttl:g} s): {named}; `--refresh` asks AWS again",)


def _age(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def _submit_all(pool, cache: DiskCache, catalog: Catalog, req: MarketRequest) -> dict[tuple, object]:
    # Spot prices of every type a Spot layout may get, flexible layouts' members too
    spot_types = sorted({t for t, counts in req.spot_counts.items() if counts} | {t for s in req.flexible_sets for t in s})
    jobs: dict[tuple, object] = {}
    for region in req.regions:
        jobs[("azs", region)] = pool.submit(cached, cache, {"op": "azs", "region": region},
                                            lambda r=region: _availability_zones(r))
        if spot_types:
            jobs[("spot", region)] = pool.submit(
                cached, cache, {"op": "spot", "region": region, "types": spot_types,
                                 "window": req.window_hours, "hour": int(time.time() // 3600)},
                lambda r=region: _spot_price_history(r, spot_types, req.window_hours))
        placement.submit_scores(pool, cache, req, region, jobs)
        for platform in req.platforms:
            service = platform_facts(platform).price_list
            for t in req.instance_types:
                if not platform_facts(platform).offers(catalog.instances[t]):
                    continue
                jobs[("price", platform, region, t)] = pool.submit(
                    cached, cache, {"op": "price", "service": service, "region": region, "type": t},
                    lambda s=service, r=region, it=t: _on_demand_price(s, r, it))
        for platform in req.platforms:
            code, keys = _quota_keys(catalog, req, platform)
            jobs[("quota", region, code)] = pool.submit(
                cached, cache, {"op": "quota", "v": 2, "region": region, "service": code, "keys": sorted(keys)},
                lambda r=region, c=code, k=keys: _quotas(r, c, k))
    return jobs


def _quota_keys(catalog: Catalog, req: MarketRequest, platform: str) -> tuple[str, set[str]]:
    """(service code, what identifies each quota): EC2 by QuotaCode, SageMaker by QuotaName."""
    own = platform_facts(platform)
    if own.type_quota is None:   # vCPUs of the family's quota
        return own.quota_service, {catalog.ec2_quota(t, m)[0] for t in req.instance_types for m in req.markets}
    return own.quota_service, {own.quota_name(t, m) for t in req.instance_types for m in req.markets}


def _assemble(catalog: Catalog, req: MarketRequest, results: dict, errors: dict) -> Quotes:
    warnings: list[str] = []
    live_regions = []
    spot_prices: dict[tuple[str, str], dict[str, SpotPrice]] = {}
    scores_out: dict[tuple[str, str, int], dict[str, int]] = {}
    configs: dict[tuple[str, str, int], tuple[str, ...]] = {}
    for region in req.regions:
        if ("azs", region) in errors:
            warnings.append(f"{region}: DescribeAvailabilityZones failed ({aws.error_summary(errors[('azs', region)])})"
                            f"; {region}'s options are left out")
            continue
        live_regions.append(region)
        warnings += _partial_failures(region, errors)
        az_names = results[("azs", region)]
        for itype, per_az in (results.get(("spot", region)) or {}).items():
            spot_prices[(region, itype)] = {az: SpotPrice(v["mean"], v["latest"], req.window_hours)
                                            for az, v in per_az.items()}
        placement.assemble_scores(req, region, results, az_names, scores_out, configs)
    warnings += placement.score_refusals(errors, live_regions)
    on_demand, quotas, quota_codes = _prices_and_quotas(catalog, results, errors, warnings)
    return Quotes(source="live", regions=tuple(live_regions), on_demand=on_demand, spot_prices=spot_prices,
                  placement_scores=scores_out, score_configs=configs, quotas=quotas, quota_codes=quota_codes,
                  warnings=tuple(warnings))


def _partial_failures(region: str, errors: dict) -> list[str]:
    """One warning per failed Spot read of a region that stays in the plan."""
    out = []
    if ("spot", region) in errors:
        out.append(f"{region}: DescribeSpotPriceHistory failed ({aws.error_summary(errors[('spot', region)])}); "
                   "its Spot options are priced from the Spot advisor's savings")
    return out


def _prices_and_quotas(catalog: Catalog, results: dict, errors: dict, warnings: list[str]):
    on_demand: dict[tuple[str, str, str], float] = {}
    quotas: dict[tuple[str, str, str], float] = {}
    quota_codes: dict[tuple[str, str, str], str] = {}
    for key, val in results.items():
        if key[0] == "price" and val is not None:
            _, platform, region, t = key
            on_demand[(platform, region, t)] = float(val)
        if key[0] == "quota":
            _, region, code = key
            for name, v in val["values"].items():
                quotas[(region, code, name)] = v
                quota_codes[(region, code, name)] = val["codes"].get(name, "")
    price_failures: dict[str, str] = {}
    for key, e in errors.items():
        if key[0] == "price":
            price_failures.setdefault(key[1], aws.error_summary(e))
        if key[0] == "quota":
            warnings.append(f"{key[1]}: Service Quotas for {key[2]} unreadable ({aws.error_summary(e)}); "
                            "quotas not checked there")
    for platform, why in price_failures.items():
        warnings.append(f"Pricing API for {platform} failed ({why}); its On-Demand prices come from the catalog "
                        f"dated {catalog.date}")
    return on_demand, quotas, quota_codes
