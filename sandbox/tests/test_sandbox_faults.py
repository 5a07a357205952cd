"""Fault switches and the admin endpoint: throttling as each service sends it, latency, resets."""
from __future__ import annotations

import urllib.request

import pytest
from botocore.exceptions import ClientError

from trainctl_sandbox.admin import SandboxAdminError

ONE_TRY = {"total_max_attempts": 1, "mode": "standard"}  # botocore: max_attempts counts retries only


def test_standard_retries_absorb_a_throttle_of_two_ec2_calls(sandbox):
    ec2 = sandbox.client("ec2")  # standard mode: 3 attempts
    sandbox.admin.throttle("DescribeAvailabilityZones", 2)
    resp = ec2.describe_availability_zones()
    assert resp["ResponseMetadata"]["RetryAttempts"] == 2
    assert resp["AvailabilityZones"]


def test_a_longer_ec2_throttle_surfaces_request_limit_exceeded(sandbox):
    ec2 = sandbox.client("ec2")
    sandbox.admin.throttle("RunInstances", 3)
    with pytest.raises(ClientError) as e:
        ec2.run_instances(ImageId="ami-12345678", InstanceType="g5.xlarge", MinCount=1, MaxCount=1)
    err = e.value.response
    assert err["Error"]["Code"] == "RequestLimitExceeded"
    assert err["ResponseMetadata"]["HTTPStatusCode"] == 503 and err["ResponseMetadata"]["RetryAttempts"] == 2
    assert ec2.describe_instances()["Reservations"] == []  # no throttled call reached moto
    ec2.run_instances(ImageId="ami-12345678", InstanceType="g5.xlarge", MinCount=1, MaxCount=1)


def test_json_services_throttle_with_throttling_exception(sandbox):
    pricing = sandbox.client("pricing")
    sandbox.admin.throttle("GetProducts", 2)
    assert pricing.get_products(ServiceCode="AmazonEC2", MaxResults=1)["ResponseMetadata"]["RetryAttempts"] == 2
    sandbox.admin.throttle("pricing:GetProducts", 3)
    with pytest.raises(ClientError) as e:
        pricing.get_products(ServiceCode="AmazonEC2", MaxResults=1)
    assert e.value.response["Error"]["Code"] == "ThrottlingException"


@pytest.mark.parametrize("service,operation,call,code,status", [
    ("sagemaker", "ListTrainingJobs", lambda c: c.list_training_jobs(), "ThrottlingException", 400),
    ("iam", "GetRole", lambda c: c.get_role(RoleName="trainctl-sagemaker-execution"), "Throttling", 400),
    ("s3", "ListBuckets", lambda c: c.list_buckets(), "SlowDown", 503),
    ("service-quotas", "ListServiceQuotas", lambda c: c.list_service_quotas(ServiceCode="ec2"),
     "ThrottlingException", 400),
])
def test_every_protocol_throttles_in_its_own_shape(sandbox, service, operation, call, code, status):
    client = sandbox.client(service, retries=ONE_TRY)
    sandbox.admin.throttle(operation, 1)
    with pytest.raises(ClientError) as e:
        call(client)
    assert e.value.response["Error"]["Code"] == code
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
    call(client)  # the switch is spent


def test_a_service_qualified_throttle_leaves_other_services_alone(sandbox):
    sandbox.admin.throttle("ec2:DescribeVpcs", 1)
    ec2 = sandbox.client("ec2", retries=ONE_TRY)
    with pytest.raises(ClientError):
        ec2.describe_vpcs()
    sandbox.admin.throttle("ec2:GetRole", 1)
    sandbox.client("iam", retries=ONE_TRY).get_role(RoleName="trainctl-sagemaker-execution")


def test_latency_switches_are_recorded_and_reset(sandbox):
    sandbox.admin.set_latency("*", 1)
    sandbox.admin.set_latency("DescribeRegions", 2)
    assert sandbox.admin.info()["faults"]["latency_ms"] == {"*": 1.0, "DescribeRegions": 2.0}
    assert sandbox.client("ec2").describe_regions()["Regions"]
    sandbox.admin.set_latency("DescribeRegions", 0)
    assert sandbox.admin.info()["faults"]["latency_ms"] == {"*": 1.0}
    sandbox.admin.reset()
    assert sandbox.admin.info()["faults"]["latency_ms"] == {}


def test_admin_errors_say_what_is_wrong(sandbox):
    with pytest.raises(SandboxAdminError) as e:
        sandbox.admin.action("no_such_action")
    assert e.value.status == 404 and "set_capacity" in e.value.message
    with pytest.raises(SandboxAdminError) as e:
        sandbox.admin.action("throttle", operation="RunInstances")
    assert e.value.status == 400 and "times" in e.value.message
    with pytest.raises(SandboxAdminError) as e:
        sandbox.admin.set_quota("ec2", "No such quota", 1)
    assert e.value.status == 400


def test_info_lists_extensions_and_admin_actions(sandbox):
    info = sandbox.admin.info()
    assert info["ec2_ready"] and info["endpoint_url"] == sandbox.endpoint_url
    assert {"trainctl_sandbox.ec2.fleet", "trainctl_sandbox.market.pricing"} <= set(info["extensions"])
    assert {"set_capacity", "throttle", "set_latency", "set_quota"} <= set(info["admin_actions"])


def test_moto_api_reset_resets_and_reseeds_the_sandbox(sandbox):
    ec2 = sandbox.client("ec2")
    ec2.run_instances(ImageId="ami-12345678", InstanceType="g5.xlarge", MinCount=1, MaxCount=1)
    sandbox.admin.set_capacity("g5.xlarge", None, available=False)
    urllib.request.urlopen(urllib.request.Request(f"{sandbox.endpoint_url}/moto-api/reset", method="POST"))
    assert ec2.describe_instances()["Reservations"] == []
    assert sandbox.admin.info()["faults"]["capacity"] == []
    sandbox.client("s3").head_bucket(Bucket="trainctl-123456789012-us-east-1")
