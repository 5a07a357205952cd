"""The sandbox's server-side check of requests against botocore's models (strict_requests.py).

Requests are built by botocore's own serializers, as a client would send them; reading them back must give the
parameters the client passed (a round trip, for each protocol trainctl uses), and the constraints AWS enforces on
the server must be reported in AWS's words."""
from __future__ import annotations

import botocore.session
import pytest
from botocore.serialize import create_serializer

from trainctl_sandbox.server import strict_requests as strict


def _wire(service: str, operation: str, params: dict):
    model = botocore.session.get_session().get_service_model(service)
    op = model.operation_model(operation)
    protocol = model.metadata["protocol"]
    req = create_serializer(protocol, include_validation=False).serialize_to_request(params, op)
    body = req["body"] if isinstance(req["body"], bytes) else (
        req["body"].encode() if isinstance(req["body"], str) else
        "&".join(f"{k}={v}" for k, v in req["body"].items()).encode())
    if isinstance(req["body"], dict):
        from urllib.parse import urlencode
        body = urlencode(req["body"]).encode()
    query = "&".join(f"{k}={v}" for k, v in (req.get("query_string") or {}).items()) \
        if isinstance(req.get("query_string"), dict) else (req.get("query_string") or "")
    return op, protocol, body, query, req["url_path"], dict(req["headers"])


FLEET = {"Type": "instant", "ClientToken": "tok-1",
         "LaunchTemplateConfigs": [{"LaunchTemplateSpecification": {"LaunchTemplateName": "trainctl-lt", "Version": "$Latest"},
                                    "Overrides": [{"InstanceType": "g5.xlarge", "SubnetId": "subnet-1",
                                                   "Placement": {"GroupName": "pg"}},
                                                  {"InstanceType": "g5.xlarge", "SubnetId": "subnet-2"}]}],
         "TargetCapacitySpecification": {"TotalTargetCapacity": 2, "DefaultTargetCapacityType": "spot"},
         "SpotOptions": {"AllocationStrategy": "capacity-optimized", "MinTargetCapacity": 2,
                         "SingleAvailabilityZone": True},
         "TagSpecifications": [{"ResourceType": "fleet", "Tags": [{"Key": "trainctl:job", "Value": "j"}]}]}


@pytest.mark.parametrize("service,operation,params", [
    ("ec2", "CreateFleet", FLEET),
    ("ec2", "DescribeInstances", {"Filters": [{"Name": "tag:trainctl:job", "Values": ["a", "b"]}], "MaxResults": 5}),
    ("iam", "CreateRole", {"RoleName": "r", "Path": "/trainctl/", "AssumeRolePolicyDocument": "{}",
                           "Tags": [{"Key": "k", "Value": "v"}]}),
    ("sagemaker", "CreateTrainingJob", {"TrainingJobName": "job-1", "RoleArn": "arn:aws:iam::123456789012:role/r",
                                        "AlgorithmSpecification": {"TrainingInputMode": "File",
                                                                   "TrainingImage": "img"},
                                        "HyperParameters": {"steps": "10"},
                                        "OutputDataConfig": {"S3OutputPath": "s3://b/o"},
                                        "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 2,
                                                           "VolumeSizeInGB": 50},
                                        "StoppingCondition": {"MaxRuntimeInSeconds": 3600}}),
    ("s3", "PutObject", {"Bucket": "bkt", "Key": "a/b/c.tar.gz", "ServerSideEncryption": "AES256"}),
])
def test_requests_read_back_as_the_client_passed_them(service, operation, params):
    op, protocol, body, query, path, headers = _wire(service, operation, params)
    got = strict.wire_params(op, protocol, body, query, path, headers)
    if protocol == "rest-xml":
        params = {k: v for k, v in params.items() if op.input_shape.members[k].serialization.get("location")}
    assert got == params
    assert strict.check(service, operation, protocol, body, query, path, headers) is None


def test_an_iam_role_name_over_64_characters_is_refused_as_iam_refuses_it():
    op, protocol, body, query, path, headers = _wire("iam", "CreateRole", {
        "RoleName": "r" * 66, "AssumeRolePolicyDocument": "{}"})
    code, message = strict.check("iam", "CreateRole", protocol, body, query, path, headers)
    assert code == "ValidationError"
    assert message.startswith("1 validation error detected: Value '" + "r" * 66 + "' at 'roleName' failed")
    assert "length less than or equal to 64" in message


def test_a_training_job_name_breaking_the_pattern_and_a_bad_enum_are_both_reported():
    params = {"TrainingJobName": "bad_name", "RoleArn": "arn:aws:iam::123456789012:role/r",
              "AlgorithmSpecification": {"TrainingInputMode": "Streaming", "TrainingImage": "img"},
              "OutputDataConfig": {"S3OutputPath": "s3://b/o"},
              "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
              "StoppingCondition": {"MaxRuntimeInSeconds": 3600}}
    code, message = strict.check("sagemaker", "CreateTrainingJob", *_wire("sagemaker", "CreateTrainingJob",
                                                                          params)[1:])
    assert code == "ValidationException"
    assert message.startswith("2 validation errors detected")
    assert "at 'trainingJobName'" in message and "regular expression pattern" in message
    assert "at 'algorithmSpecification.trainingInputMode'" in message and "enum value set" in message


def test_a_number_out_of_range_is_refused():
    op, protocol, body, query, path, headers = _wire("ec2", "DescribeInstances", {"MaxResults": 2})
    # DescribeInstances documents MaxResults 5..1000 in text only; GetSpotPlacementScores models its range.
    op, protocol, body, query, path, headers = _wire("ec2", "GetSpotPlacementScores", {
        "TargetCapacity": 0, "InstanceTypes": ["g5.xlarge"], "SingleAvailabilityZone": True})
    code, message = strict.check("ec2", "GetSpotPlacementScores", protocol, body, query, path, headers)
    assert code == "InvalidParameterValue" and "greater than or equal to 1" in message


def test_an_undocumented_ec2_filter_name_is_refused_and_documented_ones_pass():
    ok = _wire("ec2", "DescribeVpcs", {"Filters": [{"Name": "is-default", "Values": ["true"]}]})
    assert strict.check("ec2", "DescribeVpcs", *ok[1:]) is None
    bad = _wire("ec2", "DescribeVpcs", {"Filters": [{"Name": "isdefault", "Values": ["true"]}]})
    assert strict.check("ec2", "DescribeVpcs", *bad[1:]) == ("InvalidParameterValue", "The filter 'isdefault' is invalid")
    tag = _wire("ec2", "DescribeSecurityGroups", {"Filters": [{"Name": "tag:trainctl:job", "Values": ["j"]}]})
    assert strict.check("ec2", "DescribeSecurityGroups", *tag[1:]) is None
