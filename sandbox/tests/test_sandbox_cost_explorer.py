"""Cost Explorer, answered from the sandbox's own resources and prices, through boto3 over HTTP: an On-Demand
instance is billed its lifetime x the catalog's price, only from the tag's activation, grouped "key$value"."""
from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone

import pytest
from botocore.exceptions import ClientError

from trainctl.catalog import load_catalog

REGION, KEY = "us-east-1", "trainctl:job"


def _days() -> dict:
    today = datetime.now(timezone.utc).date()
    return {"Start": str(today - timedelta(days=1)), "End": str(today + timedelta(days=1))}


def _run(sb, job: str) -> str:
    ec2 = sb.client("ec2", REGION)
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    return ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="g5.xlarge", TagSpecifications=[
        {"ResourceType": "instance", "Tags": [{"Key": KEY, "Value": job}]}])["Instances"][0]["InstanceId"]


def _lifetime(ec2, instance_id: str) -> float:
    """From LaunchTime to the end EC2 wrote in StateTransitionReason."""
    (inst,) = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"]
    ended = re.search(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:GMT|UTC)\)", inst["StateTransitionReason"]).group(1)
    return datetime.strptime(ended, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp() \
        - inst["LaunchTime"].timestamp()


def _billed(ce, job: str) -> float:
    out = ce.get_cost_and_usage(TimePeriod=_days(), Granularity="DAILY", Metrics=["UnblendedCost"],
                                Filter={"Tags": {"Key": KEY, "Values": [job]}}, GroupBy=[{"Type": "TAG", "Key": KEY}])
    return sum(float(g["Metrics"]["UnblendedCost"]["Amount"]) for r in out["ResultsByTime"] for g in r["Groups"]
               if g["Keys"] == [f"{KEY}${job}"])


def test_an_instance_is_billed_its_lifetime_at_the_catalogs_price_from_the_tags_activation(sandbox):
    ce, ec2 = sandbox.client("ce", "us-east-1"), sandbox.client("ec2", REGION)
    before = _run(sandbox, "before-activation")
    listed = ce.list_cost_allocation_tags(TagKeys=[KEY])["CostAllocationTags"]
    assert [(t["TagKey"], t["Status"]) for t in listed] == [(KEY, "Inactive")]
    assert ce.update_cost_allocation_tags_status(
        CostAllocationTagsStatus=[{"TagKey": KEY, "Status": "Active"}])["Errors"] == []
    time.sleep(1.1)  # launched a second after the activation: EC2 states LaunchTime to the second
    after = _run(sandbox, "after-activation")
    time.sleep(1.1)
    ec2.terminate_instances(InstanceIds=[before, after])
    price = load_catalog().on_demand_price("ec2", REGION, "g5.xlarge").usd_per_hour
    seconds = _lifetime(ec2, after)
    assert seconds >= 1 and _billed(ce, "after-activation") == pytest.approx(seconds / 3600 * price, abs=1e-9)
    # launched before the activation: only its time since then is billed to the tag
    assert 0 < _billed(ce, "before-activation") < _lifetime(ec2, before) / 3600 * price


def test_cost_explorer_refuses_what_aws_refuses(sandbox):
    ce = sandbox.client("ce", "us-east-1")
    day = str(datetime.now(timezone.utc).date())
    with pytest.raises(ClientError, match="Start date"):
        ce.get_cost_and_usage(TimePeriod={"Start": day, "End": day}, Granularity="DAILY", Metrics=["UnblendedCost"])
    with pytest.raises(ClientError):  # not in botocore's enum: the strict model check
        ce.get_cost_and_usage(TimePeriod=_days(), Granularity="WEEKLY", Metrics=["UnblendedCost"])
    out = ce.update_cost_allocation_tags_status(CostAllocationTagsStatus=[{"TagKey": "never-used", "Status": "Active"}])
    assert [e["TagKey"] for e in out["Errors"]] == ["never-used"]
