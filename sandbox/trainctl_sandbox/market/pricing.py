"""The AWS Price List API (boto3 `pricing`): GetProducts, DescribeServices, GetAttributeValues.

moto has no Pricing service, so these are answered in the WSGI middleware (JSON protocol, target
AWSPriceListService.*). Products come from the bundled catalog only, in AWS's format: `PriceList`
is a list of JSON strings, each with `product.attributes` and
`terms.OnDemand.<sku>.<term>.priceDimensions.<rate>.pricePerUnit.USD`. Only prices the catalog has
are published (no SageMaker price for a type the catalog prices on EC2 only).
"""
from __future__ import annotations

import base64
import hashlib
import json
from functools import lru_cache

from trainctl.catalog import load_catalog
from trainctl_sandbox.server.context import SandboxContext
from trainctl_sandbox.server.protocol import AwsCall, AwsError

SERVICE = "pricing"
FORMAT_VERSION = "aws_v1"
ON_DEMAND_TERM = "JRTCKXETXF"   # AWS's offer term code for On-Demand
RATE_CODE = "6YS6EN2CT7"        # AWS's rate code for hourly On-Demand usage
DEFAULT_PAGE = 100

LOCATIONS = {
    "us-east-1": ("US East (N. Virginia)", "USE1"), "us-east-2": ("US East (Ohio)", "USE2"),
    "us-west-1": ("US West (N. California)", "USW1"), "us-west-2": ("US West (Oregon)", "USW2"),
    "ca-central-1": ("Canada (Central)", "CAN1"), "eu-west-1": ("EU (Ireland)", "EU"),
    "eu-west-2": ("EU (London)", "EUW2"), "eu-central-1": ("EU (Frankfurt)", "EUC1"),
    "ap-northeast-1": ("Asia Pacific (Tokyo)", "APN1"), "ap-southeast-2": ("Asia Pacific (Sydney)", "APS2"),
    "ap-south-1": ("Asia Pacific (Mumbai)", "APS3"),
}
SERVICES = {"AmazonEC2": "Amazon Elastic Compute Cloud", "AmazonSageMaker": "Amazon SageMaker"}


def _sku(*key: str) -> str:
    digest = hashlib.blake2b("|".join(key).encode(), digest_size=10).digest()
    return base64.b32encode(digest).decode()[:16]


def _on_demand_terms(sku: str, usd: float, description: str, date: str) -> dict:
    term = f"{sku}.{ON_DEMAND_TERM}"
    rate = f"{term}.{RATE_CODE}"
    return {"OnDemand": {term: {
        "offerTermCode": ON_DEMAND_TERM, "sku": sku, "effectiveDate": f"{date}T00:00:00Z", "termAttributes": {},
        "priceDimensions": {rate: {
            "rateCode": rate, "description": description, "beginRange": "0", "endRange": "Inf", "unit": "Hrs",
            "pricePerUnit": {"USD": f"{usd:.10f}"}, "appliesTo": []}}}}}


def _common(inst, region: str) -> dict[str, str]:
    location, _ = LOCATIONS.get(region, (region, region.upper()))
    accel = inst.accelerator
    return {"regionCode": region, "location": location, "locationType": "AWS Region",
            "vcpu": str(inst.vcpus), "memory": f"{inst.ram_gib:g} GiB",
            "gpu": str(inst.accelerator_count if accel.kind == "gpu" else 0),
            "networkPerformance": f"{'Up to ' if inst.network_up_to else ''}{inst.network_gbps_burst:g} Gigabit"}


@lru_cache(maxsize=1)
def products() -> dict[str, list[dict]]:
    """Service code -> price list documents (as dicts), built once from the catalog."""
    catalog = load_catalog()
    version = catalog.date.replace("-", "") + "000000"
    out: dict[str, list[dict]] = {"AmazonEC2": [], "AmazonSageMaker": []}
    for region in catalog.priced_regions:
        _, prefix = LOCATIONS.get(region, (region, region.upper()))
        for name, inst in sorted(catalog.instances.items()):
            ec2 = catalog.on_demand_price("ec2", region, name)
            if ec2:
                sku = _sku("AmazonEC2", region, name)
                usage = "BoxUsage" if region == "us-east-1" else f"{prefix}-BoxUsage"
                attrs = {"servicecode": "AmazonEC2", "servicename": SERVICES["AmazonEC2"], "instanceType": name,
                         "instanceFamily": "GPU instance" if inst.accelerator.kind == "gpu"
                         else "Machine Learning ASIC Instances",
                         "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA",
                         "capacitystatus": "Used", "licenseModel": "No License required", "operation": "RunInstances",
                         "usagetype": f"{usage}:{name}", "currentGeneration": "Yes",
                         "processorArchitecture": "64-bit", **_common(inst, region)}
                out["AmazonEC2"].append({
                    "product": {"productFamily": "Compute Instance", "attributes": attrs, "sku": sku},
                    "serviceCode": "AmazonEC2", "version": version, "publicationDate": f"{catalog.date}T00:00:00Z",
                    "terms": _on_demand_terms(sku, ec2.usd_per_hour,
                                              f"${ec2.usd_per_hour:g} per On Demand Linux {name} Instance Hour",
                                              catalog.date)})
            sm = catalog.on_demand_price("sagemaker", region, name)
            if sm and inst.sagemaker_training:
                ml = f"ml.{name}"
                sku = _sku("AmazonSageMaker", region, name)
                attrs = {"servicecode": "AmazonSageMaker", "servicename": SERVICES["AmazonSageMaker"],
                         "instanceName": ml, "instanceType": ml, "component": "Training",
                         "usagetype": f"{prefix}-Train:{ml}", "operation": "RunInstance", **_common(inst, region)}
                out["AmazonSageMaker"].append({
                    "product": {"productFamily": "ML Instance", "attributes": attrs, "sku": sku},
                    "serviceCode": "AmazonSageMaker", "version": version,
                    "publicationDate": f"{catalog.date}T00:00:00Z",
                    "terms": _on_demand_terms(sku, sm.usd_per_hour,
                                              f"${sm.usd_per_hour:g} per hour for Training on {ml} in {region}",
                                              catalog.date)})
    return out


def _field(doc: dict, name: str) -> str | None:
    lname = name.lower()
    product = doc["product"]
    for key, value in product["attributes"].items():
        if key.lower() == lname:
            return value
    return {"sku": product["sku"], "productfamily": product["productFamily"],
            "servicecode": doc["serviceCode"]}.get(lname)


def _matches(doc: dict, flt: dict) -> bool:
    value = _field(doc, flt.get("Field", ""))
    want = str(flt.get("Value", ""))
    kind = flt.get("Type", "TERM_MATCH")
    if kind == "NONE_OF":
        return value is None or value.lower() not in {v.strip().lower() for v in want.split(",")}
    if value is None:
        return False
    if kind in ("TERM_MATCH", "EQUALS"):
        return value.lower() == want.lower()
    if kind == "CONTAINS":
        return want.lower() in value.lower()
    if kind == "ANY_OF":
        return value.lower() in {v.strip().lower() for v in want.split(",")}
    raise AwsError("InvalidParameterException", f"Filter type {kind} is not supported.")


def _service(params: dict) -> str:
    code = params.get("ServiceCode")
    if code not in SERVICES:
        raise AwsError("NotFoundException", f"The sandbox's price list has no service {code!r}; "
                                            f"it has {', '.join(SERVICES)}.")
    return code


def _page(items: list, params: dict) -> tuple[list, str | None]:
    token = params.get("NextToken")
    try:
        start = int(base64.urlsafe_b64decode(token.encode()).decode()) if token else 0
    except ValueError as e:
        raise AwsError("InvalidNextTokenException", "The NextToken is not valid.") from e
    size = int(params.get("MaxResults") or DEFAULT_PAGE)
    end = start + size
    nxt = base64.urlsafe_b64encode(str(end).encode()).decode() if end < len(items) else None
    return items[start:end], nxt


def get_products(ctx: SandboxContext, call: AwsCall, params: dict) -> dict:
    code = _service(params)
    fmt = params.get("FormatVersion") or FORMAT_VERSION
    if fmt != FORMAT_VERSION:
        raise AwsError("InvalidParameterException", f"FormatVersion {fmt} is not supported; use {FORMAT_VERSION}.")
    filters = params.get("Filters") or []
    docs = [d for d in products()[code] if all(_matches(d, f) for f in filters)]
    page, token = _page(docs, params)
    out = {"FormatVersion": FORMAT_VERSION, "PriceList": [json.dumps(d) for d in page]}
    if token:
        out["NextToken"] = token
    return out


def describe_services(ctx: SandboxContext, call: AwsCall, params: dict) -> dict:
    codes = [_service(params)] if params.get("ServiceCode") else sorted(SERVICES)
    services = [{"ServiceCode": c, "AttributeNames": sorted({k for d in products()[c]
                                                            for k in d["product"]["attributes"]})} for c in codes]
    page, token = _page(services, params)
    out = {"Services": page, "FormatVersion": FORMAT_VERSION}
    if token:
        out["NextToken"] = token
    return out


def get_attribute_values(ctx: SandboxContext, call: AwsCall, params: dict) -> dict:
    code = _service(params)
    name = params.get("AttributeName", "")
    values = sorted({v for d in products()[code] if (v := _field(d, name)) is not None})
    page, token = _page([{"Value": v} for v in values], params)
    out = {"AttributeValues": page}
    if token:
        out["NextToken"] = token
    return out


JSON_OPERATIONS = {
    (SERVICE, "GetProducts"): get_products,
    (SERVICE, "DescribeServices"): describe_services,
    (SERVICE, "GetAttributeValues"): get_attribute_values,
}


def install(ctx: SandboxContext) -> None:
    products()  # build the price list before serving, so the first GetProducts is as fast as the rest
