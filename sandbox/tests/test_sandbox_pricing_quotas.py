"""Pricing GetProducts and Service Quotas, answered from the bundled catalog, through boto3."""
from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from trainctl.catalog import load_catalog


def _products(pricing, **kw) -> list[dict]:
    return [json.loads(item) for page in pricing.get_paginator("get_products").paginate(**kw)
            for item in page["PriceList"]]


def _usd(doc: dict) -> float:
    (term,) = doc["terms"]["OnDemand"].values()
    (dim,) = term["priceDimensions"].values()
    return float(dim["pricePerUnit"]["USD"])


def _filters(**attrs: str) -> list[dict]:
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in attrs.items()]


@pytest.mark.parametrize("region", ["us-east-1", "us-west-2"])
def test_ec2_price_of_one_type_is_the_catalogs(sandbox, region):
    pricing = sandbox.client("pricing")
    docs = _products(pricing, ServiceCode="AmazonEC2", FormatVersion="aws_v1", Filters=_filters(
        instanceType="g5.12xlarge", regionCode=region, operatingSystem="Linux", tenancy="Shared",
        preInstalledSw="NA", capacitystatus="Used"))
    assert len(docs) == 1
    attrs = docs[0]["product"]["attributes"]
    assert attrs["licenseModel"] == "No License required" and attrs["vcpu"] == "48" and attrs["gpu"] == "4"
    assert attrs["memory"] == "192 GiB"
    assert attrs["location"] == {"us-east-1": "US East (N. Virginia)", "us-west-2": "US West (Oregon)"}[region]
    assert _usd(docs[0]) == load_catalog().on_demand_price("ec2", region, "g5.12xlarge").usd_per_hour


def test_sagemaker_training_prices_only_where_the_catalog_has_them(sandbox):
    pricing = sandbox.client("pricing")
    catalog = load_catalog()
    docs = _products(pricing, ServiceCode="AmazonSageMaker", Filters=_filters(
        instanceName="ml.g5.12xlarge", regionCode="us-east-1", component="Training"))
    assert len(docs) == 1
    assert docs[0]["product"]["attributes"]["usagetype"] == "USE1-Train:ml.g5.12xlarge"
    assert _usd(docs[0]) == catalog.on_demand_price("sagemaker", "us-east-1", "g5.12xlarge").usd_per_hour
    everything = _products(pricing, ServiceCode="AmazonSageMaker")
    priced = {(r, t) for r in catalog.priced_regions for t, i in catalog.instances.items()
              if i.sagemaker_training and catalog.on_demand_price("sagemaker", r, t)}
    assert {(d["product"]["attributes"]["regionCode"], d["product"]["attributes"]["instanceName"][3:])
            for d in everything} == priced
    assert catalog.on_demand_price("sagemaker", "us-east-1", "p3dn.24xlarge") is None
    assert _products(pricing, ServiceCode="AmazonSageMaker", Filters=_filters(instanceName="ml.p3dn.24xlarge")) == []


def test_get_products_pages_and_filter_types(sandbox):
    pricing = sandbox.client("pricing")
    first = pricing.get_products(ServiceCode="AmazonEC2", MaxResults=5)
    assert len(first["PriceList"]) == 5 and first["NextToken"]
    docs = _products(pricing, ServiceCode="AmazonEC2", PaginationConfig={"PageSize": 7})
    catalog = load_catalog()
    assert len(docs) == sum(1 for r in catalog.priced_regions for t in catalog.instances
                            if catalog.on_demand_price("ec2", r, t))
    assert len({d["product"]["sku"] for d in docs}) == len(docs)
    trn = _products(pricing, ServiceCode="AmazonEC2", Filters=[
        {"Type": "CONTAINS", "Field": "instanceType", "Value": "trn1"},
        {"Type": "ANY_OF", "Field": "regionCode", "Value": "us-east-1,us-west-2"}])
    assert trn and all(d["product"]["attributes"]["instanceType"].startswith("trn1") for d in trn)


def test_pricing_errors_and_describe_services(sandbox):
    pricing = sandbox.client("pricing")
    with pytest.raises(ClientError) as e:
        pricing.get_products(ServiceCode="AmazonEC2", FormatVersion="aws_v2")
    assert e.value.response["Error"]["Code"] == "InvalidParameterException"
    with pytest.raises(ClientError) as e:
        pricing.get_products(ServiceCode="AmazonRDS")
    assert e.value.response["Error"]["Code"] == "NotFoundException"
    services = pricing.describe_services()["Services"]
    assert [s["ServiceCode"] for s in services] == ["AmazonEC2", "AmazonSageMaker"]
    assert "instanceType" in services[0]["AttributeNames"]
    values = pricing.get_attribute_values(ServiceCode="AmazonEC2", AttributeName="regionCode")["AttributeValues"]
    assert {v["Value"] for v in values} == set(load_catalog().priced_regions)


# ----------------------------------------------------------------------------- Service Quotas
def _quotas(sq, code: str) -> list[dict]:
    return [q for page in sq.get_paginator("list_service_quotas").paginate(ServiceCode=code) for q in page["Quotas"]]


def test_ec2_vcpu_quotas_carry_aws_codes_and_names(sandbox):
    sq = sandbox.client("service-quotas")
    defaults = {q["QuotaCode"]: q for page in sq.get_paginator("list_aws_default_service_quotas").paginate(
        ServiceCode="ec2") for q in page["Quotas"]}
    # AWS's codes and names ("Amazon EC2 instance type quotas"), whatever trainctl's catalog says
    assert defaults["L-C4BD4855"]["QuotaName"] == "All P5 Spot Instance Requests"
    assert defaults["L-7212CCBC"]["QuotaName"] == "All P4, P3 and P2 Spot Instance Requests"
    assert defaults["L-34B43A08"]["QuotaName"] == "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests"
    assert defaults["L-B5D1601B"]["QuotaName"] == "All Inf Spot Instance Requests"
    assert defaults["L-C4BD4855"]["Value"] == 0 and defaults["L-34B43A08"]["Value"] == 5
    for markets in load_catalog().data["ec2_vcpu_quotas"].values():  # the catalog names AWS's quotas
        for code, name in markets.values():
            assert defaults[code]["QuotaName"] == name
    quota = sq.get_service_quota(ServiceCode="ec2", QuotaCode="L-DB2E81BA")["Quota"]
    assert quota["QuotaName"] == "Running On-Demand G and VT instances" and quota["Value"] == 128
    assert quota["QuotaArn"] == "arn:aws:servicequotas:us-east-1:123456789012:ec2/L-DB2E81BA"
    assert quota["UsageMetric"]["MetricDimensions"]["Class"] == "G/OnDemand"


def test_a_quota_without_applied_value_is_listed_only_as_a_default(sandbox):
    sq = sandbox.client("service-quotas")
    listed = {q["QuotaCode"] for q in _quotas(sq, "ec2")}
    assert "L-C4BD4855" not in listed and "L-3819A6DF" in listed  # P5 Spot: nobody raised it
    with pytest.raises(ClientError) as e:
        sq.get_service_quota(ServiceCode="ec2", QuotaCode="L-C4BD4855")
    assert e.value.response["Error"]["Code"] == "NoSuchResourceException"
    assert sq.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode="L-C4BD4855")["Quota"]["Value"] == 0
    sandbox.admin.set_quota("ec2", "L-C4BD4855", 192)
    assert {q["QuotaCode"]: q["Value"] for q in _quotas(sq, "ec2")}["L-C4BD4855"] == 192


def test_sagemaker_training_quotas_for_every_training_type(sandbox):
    sq = sandbox.client("service-quotas")
    quotas = _quotas(sq, "sagemaker")
    names = {q["QuotaName"] for q in quotas}
    for t, inst in load_catalog().instances.items():
        assert (f"ml.{t} for training job usage" in names) == inst.sagemaker_training
        assert (f"ml.{t} for spot training job usage" in names) == inst.sagemaker_training
    codes = {q["QuotaName"]: q["QuotaCode"] for q in quotas}
    sandbox.admin.reset()
    assert {q["QuotaName"]: q["QuotaCode"] for q in _quotas(sq, "sagemaker")} == codes  # stable codes
    assert len(set(codes.values())) == len(codes)


def test_set_quota_by_name_in_one_region_and_reset(sandbox):
    east = sandbox.client("service-quotas", "us-east-1")
    west = sandbox.client("service-quotas", "us-west-2")
    sandbox.admin.set_quota("ec2", "All P4, P3 and P2 Spot Instance Requests", 384, region="us-west-2")
    sandbox.admin.set_quota("sagemaker", "ml.g5.xlarge for spot training job usage", 0)
    assert west.get_service_quota(ServiceCode="ec2", QuotaCode="L-7212CCBC")["Quota"]["Value"] == 384
    assert east.get_service_quota(ServiceCode="ec2", QuotaCode="L-7212CCBC")["Quota"]["Value"] == 96
    assert west.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode="L-7212CCBC")["Quota"]["Value"] == 0
    spot = {q["QuotaName"]: q["Value"] for q in _quotas(east, "sagemaker")}
    assert spot["ml.g5.xlarge for spot training job usage"] == 0
    assert spot["ml.g5.xlarge for training job usage"] == 4
    sandbox.admin.reset()
    assert west.get_service_quota(ServiceCode="ec2", QuotaCode="L-7212CCBC")["Quota"]["Value"] == 96


def test_vpc_quotas_still_come_from_moto_and_unknown_services_fail(sandbox):
    sq = sandbox.client("service-quotas")
    vpc = _quotas(sq, "vpc")
    assert vpc
    one = sq.get_service_quota(ServiceCode="vpc", QuotaCode=vpc[0]["QuotaCode"])["Quota"]
    assert one["QuotaName"] == vpc[0]["QuotaName"]
    with pytest.raises(ClientError) as e:
        sq.list_service_quotas(ServiceCode="nonexistent")
    assert e.value.response["Error"]["Code"] == "NoSuchResourceException"
    with pytest.raises(ClientError) as e:
        sq.get_service_quota(ServiceCode="ec2", QuotaCode="L-00000000")
    assert e.value.response["Error"]["Code"] == "NoSuchResourceException"
