"""Service Quotas for EC2 vCPUs and SageMaker training instances (moto knows only `vpc`).

ec2: the On-Demand and Spot vCPU quota of each accelerated family group, with the codes and names
of the catalog's `ec2_vcpu_quotas`. sagemaker: "ml.<type> for training job usage" and
"ml.<type> for spot training job usage" (instances) for every catalog type SageMaker trains on,
with stable made-up quota codes. Other service codes go to moto (vpc), except ListServiceQuotas,
which moto lacks and which is answered here from moto's vpc defaults.

Defaults (the same in every region), picked so that the reference plans show a few layouts over
quota and most within: G and VT 128 vCPUs, P 96, Trn 256 (On-Demand and Spot alike);
SageMaker 4 instances of a type with <= 16 vCPUs, 2 with <= 48, 1 above (training and Spot
training alike). A test changes any of them with the admin action `set_quota`.
"""
from __future__ import annotations

import base64
import hashlib
from functools import lru_cache

from trainctl.catalog import load_catalog
from trainctl_sandbox.context import SandboxContext
from trainctl_sandbox.protocol import NOT_HANDLED, AwsCall, AwsError

SERVICE = "service-quotas"
EC2_VCPU_DEFAULTS = {"g": 128.0, "p": 96.0, "trn": 256.0}
EC2_NAME = "Amazon Elastic Compute Cloud (Amazon EC2)"
SAGEMAKER_NAME = "Amazon SageMaker"
_CLASS = {"g": "G", "p": "P", "trn": "Trn"}
DEFAULT_PAGE = 100


def sagemaker_default(vcpus: int) -> float:
    return 4.0 if vcpus <= 16 else 2.0 if vcpus <= 48 else 1.0


def _code(name: str) -> str:
    return "L-" + hashlib.blake2b(name.encode(), digest_size=4).hexdigest().upper()


@lru_cache(maxsize=1)
def definitions() -> dict[str, list[dict]]:
    """Service code -> quota definitions with default values (no region, no overrides)."""
    catalog = load_catalog()
    ec2 = []
    for group, markets in sorted(catalog.data["ec2_vcpu_quotas"].items()):
        for market, (code, name) in sorted(markets.items()):
            cls = f"{_CLASS.get(group, group.upper())}/{'Spot' if market == 'spot' else 'OnDemand'}"
            ec2.append({"ServiceCode": "ec2", "ServiceName": EC2_NAME, "QuotaCode": code, "QuotaName": name,
                        "Value": EC2_VCPU_DEFAULTS.get(group, 64.0), "Unit": "None", "Adjustable": True,
                        "GlobalQuota": False, "QuotaAppliedAtLevel": "ACCOUNT",
                        "UsageMetric": {"MetricNamespace": "AWS/Usage", "MetricName": "ResourceCount",
                                        "MetricDimensions": {"Class": cls, "Resource": "vCPU", "Service": "EC2",
                                                             "Type": "Resource"},
                                        "MetricStatisticRecommendation": "Maximum"}})
    sagemaker = []
    for name, inst in sorted(catalog.instances.items()):
        if not inst.sagemaker_training:
            continue
        for label in ("training job usage", "spot training job usage"):
            qname = f"ml.{name} for {label}"
            sagemaker.append({"ServiceCode": "sagemaker", "ServiceName": SAGEMAKER_NAME, "QuotaCode": _code(qname),
                              "QuotaName": qname, "Value": sagemaker_default(inst.vcpus), "Unit": "None",
                              "Adjustable": True, "GlobalQuota": False, "QuotaAppliedAtLevel": "ACCOUNT"})
    return {"ec2": ec2, "sagemaker": sagemaker}


def _overrides(ctx: SandboxContext) -> dict[tuple[str, str, str | None], float]:
    return ctx.state.setdefault(__name__, {})


def reset(ctx: SandboxContext) -> None:
    ctx.state.pop(__name__, None)


def quotas(ctx: SandboxContext, service_code: str, region: str, applied: bool = True) -> list[dict]:
    """The service's quotas in a region: the values in force (applied) or AWS's defaults."""
    out = []
    overrides = _overrides(ctx)
    for q in definitions()[service_code]:
        q = dict(q, QuotaArn=f"arn:aws:servicequotas:{region}:{ctx.account_id}:{service_code}/{q['QuotaCode']}")
        if applied:
            key = (service_code, q["QuotaCode"])
            q["Value"] = overrides.get((*key, region), overrides.get((*key, None), q["Value"]))
        out.append(q)
    return out


def set_quota(ctx: SandboxContext, payload: dict) -> dict:
    """Admin action: {"service_code", "quota" (code or name), "value", "region" (optional: all regions)}."""
    service_code, quota, value = payload["service_code"], payload["quota"], float(payload["value"])
    region = payload.get("region")
    if service_code not in definitions():
        raise ValueError(f"the sandbox keeps quotas for {', '.join(definitions())}, not {service_code!r}")
    match = [q for q in definitions()[service_code] if quota in (q["QuotaCode"], q["QuotaName"])]
    if not match:
        raise ValueError(f"no {service_code} quota with code or name {quota!r}")
    _overrides(ctx)[(service_code, match[0]["QuotaCode"], region)] = value
    return {"service_code": service_code, "quota_code": match[0]["QuotaCode"], "quota_name": match[0]["QuotaName"],
            "value": value, "region": region}


def _page(items: list, params: dict) -> tuple[list, str | None]:
    token = params.get("NextToken")
    try:
        start = int(base64.urlsafe_b64decode(token.encode()).decode()) if token else 0
    except ValueError as e:
        raise AwsError("InvalidPaginationTokenException", "Invalid pagination token.") from e
    end = start + int(params.get("MaxResults") or DEFAULT_PAGE)
    return items[start:end], (base64.urlsafe_b64encode(str(end).encode()).decode() if end < len(items) else None)


def _no_such(code: str | None = None) -> AwsError:
    return AwsError("NoSuchResourceException",
                    "The request failed because the specified service does not exist." if code is None
                    else f"The request failed because the specified service quota {code} does not exist.")


def _listed(ctx: SandboxContext, call: AwsCall, params: dict, applied: bool) -> dict | object:
    code = params.get("ServiceCode")
    if code in definitions():
        items = quotas(ctx, code, call.region, applied)
    elif code == "vpc" and applied:
        from moto.servicequotas.resources.default_quotas.vpc import VPC_DEFAULT_QUOTAS
        items = list(VPC_DEFAULT_QUOTAS)
    elif code == "vpc":
        return NOT_HANDLED
    else:
        raise _no_such()
    if params.get("QuotaCode"):
        items = [q for q in items if q["QuotaCode"] == params["QuotaCode"]]
    page, token = _page(items, params)
    return {"Quotas": page, **({"NextToken": token} if token else {})}


def list_service_quotas(ctx: SandboxContext, call: AwsCall, params: dict) -> dict | object:
    return _listed(ctx, call, params, applied=True)


def list_default_quotas(ctx: SandboxContext, call: AwsCall, params: dict) -> dict | object:
    return _listed(ctx, call, params, applied=False)


def _get(ctx: SandboxContext, call: AwsCall, params: dict, applied: bool) -> dict | object:
    code = params.get("ServiceCode")
    if code not in definitions():
        return NOT_HANDLED
    for q in quotas(ctx, code, call.region, applied):
        if q["QuotaCode"] == params.get("QuotaCode"):
            return {"Quota": q}
    raise _no_such(params.get("QuotaCode"))


def get_service_quota(ctx: SandboxContext, call: AwsCall, params: dict) -> dict | object:
    return _get(ctx, call, params, applied=True)


def get_default_quota(ctx: SandboxContext, call: AwsCall, params: dict) -> dict | object:
    return _get(ctx, call, params, applied=False)


def list_services(ctx: SandboxContext, call: AwsCall, params: dict) -> dict:
    services = [{"ServiceCode": "ec2", "ServiceName": EC2_NAME}, {"ServiceCode": "sagemaker",
                                                                  "ServiceName": SAGEMAKER_NAME},
                {"ServiceCode": "vpc", "ServiceName": "Amazon Virtual Private Cloud (Amazon VPC)"}]
    page, token = _page(services, params)
    return {"Services": page, **({"NextToken": token} if token else {})}


JSON_OPERATIONS = {
    (SERVICE, "ListServiceQuotas"): list_service_quotas,
    (SERVICE, "ListAWSDefaultServiceQuotas"): list_default_quotas,
    (SERVICE, "GetServiceQuota"): get_service_quota,
    (SERVICE, "GetAWSDefaultServiceQuota"): get_default_quota,
    (SERVICE, "ListServices"): list_services,
}
ADMIN_ACTIONS = {"set_quota": set_quota}


def install(ctx: SandboxContext) -> None:
    definitions()  # fail at start, not at the first call, if the catalog lacks what quotas need
