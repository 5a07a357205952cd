"""Each EC2 call is atomic, as AWS's are, and a failure inside moto reaches the client as AWS's InternalError.

The launch tier met both: after a Ctrl-C during CreateFleet, trainctl's cleanup found one of the fleet's two
instances by its tag while the sandbox was still making the other, and its TerminateInstances came back as the
HTTP server's HTML error page, which botocore cannot parse (ResponseParserError), so the cleanup stopped.

The first test is the cleanup's situation, not a race detector: on 2 cores its watcher gets a few looks in while
the fleet is made. The second pins the answer a failure inside moto gets, whatever its cause.
"""
from __future__ import annotations

import threading
from pathlib import Path

from botocore.exceptions import ClientError
from botocore.parsers import create_parser
from botocore.session import get_session
from werkzeug.test import EnvironBuilder

from trainctl_sandbox.server import seed
from trainctl_sandbox.server.context import SandboxContext
from trainctl_sandbox.server.middleware import SandboxApp

TAG = {"Key": "trainctl:job", "Value": "atomic-1"}
BY_TAG = [{"Name": "tag:trainctl:job", "Values": ["atomic-1"]}]
FLEET_SIZE = 8


def test_a_fleet_being_made_is_seen_whole_or_not_at_all_and_can_be_terminated_meanwhile(sandbox):
    ec2 = sandbox.client("ec2")
    subnet = {s["AvailabilityZone"]: s["SubnetId"] for s in ec2.describe_subnets(
        Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"]}["us-east-1b"]
    lt = ec2.create_launch_template(LaunchTemplateName="atomic", LaunchTemplateData={
        "ImageId": seed.ami_id("us-east-1", "gpu-pytorch-2.7"), "InstanceType": "g5.xlarge",
        "TagSpecifications": [{"ResourceType": "instance", "Tags": [TAG]}]})["LaunchTemplate"]["LaunchTemplateId"]
    done, looking, seen, failures = threading.Event(), threading.Event(), [], []
    watcher = sandbox.client("ec2")

    def look_and_terminate() -> None:  # what an interrupted launch's cleanup does, as fast as it can
        while not done.is_set():
            try:
                found = [i for r in watcher.describe_instances(Filters=BY_TAG)["Reservations"]
                         for i in r["Instances"]]
                seen.append(sorted((i["InstanceId"], i.get("InstanceLifecycle")) for i in found))
                looking.set()
                if found:
                    watcher.terminate_instances(InstanceIds=[i["InstanceId"] for i in found])
            except Exception as e:  # noqa: BLE001 - any failure is the finding
                failures.append(repr(e))

    thread = threading.Thread(target=look_and_terminate)
    thread.start()
    looking.wait(60)  # it is asking before the fleet is asked for
    try:
        fleet = ec2.create_fleet(Type="instant", LaunchTemplateConfigs=[{
            "LaunchTemplateSpecification": {"LaunchTemplateId": lt, "Version": "$Latest"},
            "Overrides": [{"SubnetId": subnet}]}],
            TargetCapacitySpecification={"TotalTargetCapacity": FLEET_SIZE, "DefaultTargetCapacityType": "spot"})
    finally:
        done.set()
        thread.join()
    assert failures == []
    made = sorted(i for g in fleet["Instances"] for i in g["InstanceIds"])
    assert len(made) == FLEET_SIZE
    # every answer held the fleet's instances whole (all of them, each already a Spot instance) or none
    assert all(s == [] or s == [(i, "spot") for i in made] for s in seen), seen
    ec2.terminate_instances(InstanceIds=made)


def _ec2_request(operation: str) -> dict:
    return EnvironBuilder(method="POST", path="/", data=f"Action={operation}&Version=2016-11-15",
                          content_type="application/x-www-form-urlencoded; charset=utf-8", headers={
                              "Authorization": "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261129/us-east-1/ec2/"
                                               "aws4_request, SignedHeaders=host, Signature=0"}).get_environ()


def test_a_failure_inside_moto_is_answered_as_aws_internal_error_which_botocore_reads(tmp_path: Path):
    def failing_moto(environ, start_response):
        raise RuntimeError("dictionary changed size during iteration")

    app = SandboxApp(SandboxContext(endpoint_url="http://127.0.0.1:1", workdir=tmp_path), failing_moto,
                     admin=lambda action, payload: {}, json_operations={}, wait_ready=lambda call: None)
    answered: dict = {}
    body = b"".join(app(_ec2_request("DescribeInstances"),
                        lambda status, headers, exc_info=None: answered.update(status=status, headers=headers)))
    assert answered["status"].startswith("500 ")
    operation = get_session().get_service_model("ec2").operation_model("DescribeInstances")
    parsed = create_parser("ec2").parse({"status_code": 500, "headers": dict(answered["headers"]), "body": body},
                                        operation.output_shape)
    assert parsed["Error"]["Code"] == "InternalError"   # retried by botocore's standard mode, then a ClientError
    assert "dictionary changed size" in parsed["Error"]["Message"]
    assert ClientError(parsed, "DescribeInstances").response["Error"]["Code"] == "InternalError"
