"""Service Quotas for EC2 vCPUs and SageMaker training instances (moto knows only `vpc`).

ec2: AWS's own On-Demand and Spot vCPU quotas, with AWS's quota codes and names ("Amazon EC2 instance
type quotas", EC2 instance types guide), kept here and not taken from trainctl's catalog, so that a
plan matching quotas by a wrong name or code finds nothing. sagemaker: "ml.<type> for training job
usage" and "ml.<type> for spot training job usage" (instances) for every catalog type SageMaker trains
on, with stable made-up quota codes. Other service codes go to moto (vpc), except ListServiceQuotas,
which moto lacks and which is answered here from moto's vpc defaults.

Applied values (the same in every region), picked so that the reference plans show a few layouts over
quota and most within: G and VT 128 vCPUs, P 96, Trn 256 (On-Demand and Spot alike), Standard 64;
SageMaker 4 instances of a type with <= 16 vCPUs, 2 with <= 48, 1 above. As on AWS, a quota nobody
raised has no applied value: ListServiceQuotas leaves it out and GetServiceQuota does not know it
(botocore docstring of ListServiceQuotas); GetAWSDefaultServiceQuota gives AWS's default (0 for
accelerated classes, 5 for Standard). Here that is every quota without an applied value below, P5 Spot
among them. A test changes any of them with the admin action `set_quota` (which applies a value).
"""
from __future__ import annotations

import base64
import hashlib
from functools import lru_cache

from trainctl.catalog import load_catalog
from trainctl_sandbox.server.context import SandboxContext
from trainctl_sandbox.server.protocol import NOT_HANDLED, AwsCall, AwsError

SERVICE = "service-quotas"
EC2_NAME = "Amazon Elastic Compute Cloud (Amazon EC2)"
SAGEMAKER_NAME = "Amazon SageMaker"
DEFAULT_PAGE = 100
# AWS's EC2 vCPU quotas: (code, name, usage class, AWS default, value applied in the sandbox's account or None)
EC2_VCPU_QUOTAS = (
    ("L-6E869C2A", "Running On-Demand DL instances", "DL/OnDemand", 0.0, None),
    ("L-74FC7D96", "Running On-Demand F instances", "F/OnDemand", 0.0, None),
    ("L-DB2E81BA", "Running On-Demand G and VT instances", "G/OnDemand", 0.0, 128.0),
    ("L-F7808C92", "Running On-Demand HPC instances", "HPC/OnDemand", 0.0, None),
    ("L-43DA4232", "Running On-Demand High Memory instances", "HighMem/OnDemand", 0.0, None),
    ("L-1945791B", "Running On-Demand Inf instances", "Inf/OnDemand", 0.0, None),
    ("L-417A185B", "Running On-Demand P instances", "P/OnDemand", 0.0, 96.0),
    ("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", "Standard/OnDemand", 5.0, 64.0),
    ("L-2C3B7624", "Running On-Demand Trn instances", "Trn/OnDemand", 0.0, 256.0),
    ("L-7295265B", "Running On-Demand X instances", "X/OnDemand", 0.0, None),
    ("L-85EED4F7", "All DL Spot Instance Requests", "DL/Spot", 0.0, None),
    ("L-88CF9481", "All F Spot Instance Requests", "F/Spot", 0.0, None),
    ("L-3819A6DF", "All G and VT Spot Instance Requests", "G/Spot", 0.0, 128.0),
    ("L-B5D1601B", "All Inf Spot Instance Requests", "Inf/Spot", 0.0, None),
    ("L-7212CCBC", "All P4, P3 and P2 Spot Instance Requests", "P/Spot", 0.0, 96.0),
    ("L-C4BD4855", "All P5 Spot Instance Requests", "P5/Spot", 0.0, None),
    ("L-34B43A08", "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests", "Standard/Spot", 5.0, 64.0),
    ("L-6B0D517C", "All Trn Spot Instance Requests", "Trn/Spot", 0.0, 256.0),
    ("L-E3A00192", "All X Spot Instance Requests", "X/Spot", 0.0, None),
)


def sagemaker_default(vcpus: int) -> float:
    return 4.0 if vcpus <= 16 else 2.0 if vcpus <= 48 else 1.0


def _code(name: str) -> str:
    return "L-" + hashlib.blake2b(name.encode(), digest_size=4).hexdigest().upper()


@lru_cache(maxsize=1)
def definitions() -> dict[str, list[dict]]:
    """Service code -> quota definitions with AWS's default values (no region, no applied values)."""
    ec2 = [{"ServiceCode": "ec2", "ServiceName": EC2_NAME, "QuotaCode": code, "QuotaName": name, "Value": default,
            "Unit": "None", "Adjustable": True, "GlobalQuota": False, "QuotaAppliedAtLevel": "ACCOUNT",
            "UsageMetric": {"MetricNamespace": "AWS/Usage", "MetricName": "ResourceCount",
                            "MetricDimensions": {"Class": cls, "Resource": "vCPU", "Service": "EC2", "Type": "Resource"},
                            "MetricStatisticRecommendation": "Maximum"}}
           for code, name, cls, default, _ in EC2_VCPU_QUOTAS]
    sagemaker = []
    for name, inst in sorted(load_catalog().instances.items()):
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


_EC2_APPLIED = {code: applied for code, _, _, _, applied in EC2_VCPU_QUOTAS}


def _applied_value(ctx: SandboxContext, service_code: str, quota: dict, region: str) -> float | None:
    """The value applied in this account and region (set_quota, else the account's own), None when none is."""
    overrides, key = _overrides(ctx), (service_code, quota["QuotaCode"])
    value = overrides.get((*key, region), overrides.get((*key, None)))
    if value is not None:
        return value
    return _EC2_APPLIED.get(quota["QuotaCode"]) if service_code == "ec2" else quota["Value"]


def quotas(ctx: SandboxContext, service_code: str, region: str, applied: bool = True) -> list[dict]:
    """The service's quotas in a region: those with a value in force (applied) or all with AWS's defaults."""
    out = []
    for q in definitions()[service_code]:
        q = dict(q, QuotaArn=f"arn:aws:servicequotas:{region}:{ctx.account_id}:{service_code}/{q['QuotaCode']}")
        if applied:
            q["Value"] = _applied_value(ctx, service_code, q, region)
            if q["Value"] is None:
                continue  # no applied value: AWS lists only its default (GetAWSDefaultServiceQuota)
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
