"""The EC2 backend against the sandbox over HTTP: the request set, all-or-nothing, failover, re-runs, teardown."""
from __future__ import annotations

import base64
import json

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError
from botocore.validate import validate_parameters

from tests.support.ec2_jobs import leftovers, live, option, settings
from trainctl.aws import clients as aws
from trainctl.backends.base import JOB_TAG, CapacityError
from trainctl.backends.ec2 import Ec2Backend, name_for
from trainctl_sandbox.server import seed


def test_the_request_set_is_secure_tagged_in_one_az_and_valid(env):
    sb, spec, path = env
    request = Ec2Backend().prepare(option(), spec, settings(path))
    calls = {c.operation: c for c in request.calls}
    # Everything botocore would send is valid for its operation.
    for call in request.calls:
        client = sb.client(call.service)
        validate_parameters(call.params, client.meta.service_model.operation_model(call.operation).input_shape)
    data = calls["CreateLaunchTemplate"].params["LaunchTemplateData"]
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    root = data["BlockDeviceMappings"][0]["Ebs"]
    assert root["VolumeType"] == "gp3" and root["Encrypted"] is True
    assert data["ImageId"] == seed.ami_id("us-east-1", "gpu-pytorch-2.10-al2023")
    nics = data["NetworkInterfaces"]
    assert len(nics) == 4 and {n["InterfaceType"] for n in nics} == {"efa"}
    assert sorted(n["NetworkCardIndex"] for n in nics) == [0, 1, 2, 3]
    assert calls["CreatePlacementGroup"].params["Strategy"] == "cluster"
    fleets = [c for c in request.calls if c.operation == "CreateFleet"]
    first = fleets[0].params
    assert first["Type"] == "instant" and first["ClientToken"]
    assert first["SpotOptions"]["SingleAvailabilityZone"] and first["SpotOptions"]["MinTargetCapacity"] == 2
    subnets = {s["SubnetId"]: s["AvailabilityZone"] for s in sb.client("ec2").describe_subnets()["Subnets"]}
    for fleet in fleets:  # each fleet attempt stays inside one AZ
        assert len({subnets[o["SubnetId"]] for o in fleet.params["LaunchTemplateConfigs"][0]["Overrides"]}) == 1
    assert subnets[first["LaunchTemplateConfigs"][0]["Overrides"][0]["SubnetId"]] == "us-east-1a"
    # Tags on every resource a call creates.
    for call in request.calls:
        text = json.dumps(call.params.get("TagSpecifications") or call.params.get("Tags") or call.params.get("Tagging")
                          or call.params.get("tags"))  # CloudWatch Logs: lower-case `tags`
        if call.operation.startswith("Create") or call.operation == "PutObject":
            assert JOB_TAG in text, call.operation
    # No rule open to the world; SSH only when asked for.
    ingress = [c for c in request.calls if c.operation == "AuthorizeSecurityGroupIngress"]
    assert len(ingress) == 1 and "0.0.0.0/0" not in json.dumps([c.params for c in ingress])
    # No secrets in the user data.
    user_data = base64.b64decode(data["UserData"]).decode()
    for secret in ("AKIA", "aws_secret_access_key", "AWS_SECRET", "testing", sb.env["AWS_SECRET_ACCESS_KEY"]):
        assert secret not in user_data
    assert "torch.distributed.run" not in user_data  # the agent is in S3, not here; the config is plain JSON
    assert '"nnodes": 2' in user_data and '"nproc_per_node": 8' in user_data


def test_the_launch_uploads_the_node_agent_once_and_the_node_role_reads_exactly_it(env):
    """EC2's user data holds 16 KB: the agent goes to the job bucket under its sha256, the config names it."""
    import hashlib

    from trainctl.bootstrap import agent_archive

    sb, spec, path = env
    backend = Ec2Backend()
    request = backend.prepare(option(), spec, settings(path))
    sha256 = hashlib.sha256(agent_archive()).hexdigest()
    key = f"trainctl/agent/{sha256}/trainctl_node.tar.gz"
    put = next(c for c in request.calls if c.operation == "PutObject" and c.params["Key"] == key)
    assert put.params["Body"] == agent_archive() and put.params["ServerSideEncryption"] == "AES256"
    assert put.params["ChecksumSHA256"] == base64.b64encode(bytes.fromhex(sha256)).decode()
    assert put.params["ExpectedBucketOwner"] == "123456789012" and put.params["Tagging"] == f"{JOB_TAG}=job-1"
    data = next(c for c in request.calls if c.operation == "CreateLaunchTemplate").params["LaunchTemplateData"]
    user_data = base64.b64decode(data["UserData"]).decode()
    config = json.loads(user_data.split("<<'TRAINCTL_CONFIG'\n", 1)[1].split("\nTRAINCTL_CONFIG", 1)[0])
    assert (config["agent_key"], config["agent_sha256"]) == (key, sha256)
    policy = json.loads(next(c for c in request.calls if c.operation == "PutRolePolicy").params["PolicyDocument"])
    reads = next(s for s in policy["Statement"] if s["Sid"] == "ReadCodeAndJob")["Resource"]
    assert [r for r in reads if "/trainctl/" in r] == [f"arn:aws:s3:::{put.params['Bucket']}/{config['code_key']}",
                                                        f"arn:aws:s3:::{put.params['Bucket']}/{key}"]
    backend.submit(request)
    again = backend.prepare(option(), spec, settings(path, job="job-2"))
    assert not [c for c in again.calls if c.operation == "PutObject" and c.params["Key"] == key]  # already there


def test_neuron_types_get_the_neuron_ami_eight_efa_interfaces_and_32_processes(env):
    sb, spec, path = env
    request = Ec2Backend().prepare(option("trn1.32xlarge", az=None), spec, settings(path))
    data = next(c for c in request.calls if c.operation == "CreateLaunchTemplate").params["LaunchTemplateData"]
    assert data["ImageId"] == seed.ami_id("us-east-1", "neuron-pytorch-2.9")
    assert len(data["NetworkInterfaces"]) == 8
    user_data = base64.b64decode(data["UserData"]).decode()
    assert '"nproc_per_node": 32' in user_data and '"accelerator": "neuron"' in user_data


def test_ssh_only_from_the_given_cidr_and_never_the_world(env):
    sb, spec, path = env
    request = Ec2Backend().prepare(option("g5.xlarge"), spec, settings(path, ssh_cidr="203.0.113.7/32"))
    ingress = [c.params for c in request.calls if c.operation == "AuthorizeSecurityGroupIngress"]
    ssh = [p for p in ingress if p["IpPermissions"][0].get("FromPort") == 22]
    assert ssh[0]["IpPermissions"][0]["IpRanges"][0]["CidrIp"] == "203.0.113.7/32"
    from trainctl.errors import UsageError
    with pytest.raises(UsageError):
        Ec2Backend().prepare(option("g5.xlarge"), spec, settings(path, ssh_cidr="0.0.0.0/0"))


def test_launch_creates_everything_tagged_and_down_removes_all_of_it(env):
    sb, spec, path = env
    backend = Ec2Backend()
    request = backend.prepare(option(), spec, settings(path))
    messages = []
    out = backend.submit(request, messages.append)
    instances = live(sb)
    assert sorted(i["InstanceId"] for i in instances) == sorted(out["instance_ids"])
    assert len(instances) == 2 and {i["Placement"]["AvailabilityZone"] for i in instances} == {"us-east-1a"}
    assert {i["Placement"]["GroupName"] for i in instances} == {name_for("job-1")}
    assert {i["InstanceLifecycle"] for i in instances} == {"spot"}
    ec2 = sb.client("ec2")
    sg = ec2.describe_security_groups(Filters=[{"Name": f"tag:{JOB_TAG}", "Values": ["job-1"]}])["SecurityGroups"][0]
    rules = sg["IpPermissions"]
    assert rules and all(not r.get("IpRanges") for r in rules)
    assert rules[0]["UserIdGroupPairs"][0]["GroupId"] == sg["GroupId"]
    # The node role allows only the job's prefix and logs.
    policy = sb.client("iam").get_role_policy(RoleName=name_for("job-1"), PolicyName="trainctl-node")
    text = json.dumps(policy["PolicyDocument"])
    assert "job-1/*" in text and "/trainctl/job-1" in text and '"s3:*"' not in text
    removed = backend.cleanup("job-1", "us-east-1")
    kinds = {line.split(" ")[0] for line in removed}
    assert {"instance", "launch", "placement", "security", "role"} <= kinds
    assert any(line.startswith("instance profile") for line in removed)
    assert leftovers(sb) == []
    assert backend.cleanup("job-1", "us-east-1") == []  # safe to repeat


def test_partial_capacity_is_terminated_and_the_next_az_is_used(env):
    sb, spec, path = env
    sb.admin.set_capacity("p4d.24xlarge", "us-east-1a", 1)  # one node fits in the plan's AZ, not two
    backend = Ec2Backend()
    request = backend.prepare(option(), spec, settings(path))
    messages = []
    out = backend.submit(request, messages.append)
    assert out["availability_zone"] != "us-east-1a"
    assert {i["Placement"]["AvailabilityZone"] for i in live(sb)} == {out["availability_zone"]}
    assert len(live(sb)) == 2
    assert any("us-east-1a got 0 of 2" in m for m in messages), messages
    backend.cleanup("job-1", "us-east-1")


def _drop_min_target(params, **_):
    # A fault: the fleet ignores MinTargetCapacity (as a fleet of weighted or mixed pools can), so a
    # partial fleet comes back and trainctl itself must give it back.
    for options in ("SpotOptions", "OnDemandOptions"):
        params.get(options, {}).pop("MinTargetCapacity", None)


def test_a_partial_fleet_is_terminated_all_or_nothing(env):
    sb, spec, path = env
    for az in ("us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1e", "us-east-1f"):
        sb.admin.set_capacity("p4d.24xlarge", az, 1)
    backend = Ec2Backend()
    request = backend.prepare(option(), spec, settings(path))
    aws.client("ec2", "us-east-1").meta.events.register("provide-client-params.ec2.CreateFleet", _drop_min_target)
    messages = []
    with pytest.raises(CapacityError) as e:
        backend.submit(request, messages.append)
    assert "1 of 2" in str(e.value)
    assert any("terminating i-" in m for m in messages), messages
    assert leftovers(sb) == []
    # The instances given back are marked as trainctl's doing, not interruptions.
    ec2 = sb.client("ec2")
    gone = [i for r in ec2.describe_instances(Filters=[{"Name": f"tag:{JOB_TAG}", "Values": ["job-1"]}])[
        "Reservations"] for i in r["Instances"]]
    assert gone and all({"Key": "trainctl:terminated-by", "Value": "trainctl"} in i["Tags"] for i in gone)


def test_no_capacity_anywhere_leaves_nothing_behind(env):
    sb, spec, path = env
    sb.admin.set_capacity("p4d.24xlarge", None, False)
    backend = Ec2Backend()
    with pytest.raises(CapacityError):
        backend.submit(backend.prepare(option(), spec, settings(path)))
    assert leftovers(sb) == []


def test_re_running_the_same_request_and_a_new_prepare_launch_nothing_new(env):
    sb, spec, path = env
    backend = Ec2Backend()
    request = backend.prepare(option(), spec, settings(path))
    first = backend.submit(request)
    again = backend.submit(request)
    assert sorted(again["instance_ids"]) == sorted(first["instance_ids"])
    second = backend.prepare(option(), spec, settings(path))
    created = ("CreateFleet", "CreateSecurityGroup", "CreateLaunchTemplate")
    assert not [c for c in second.calls if c.operation in created]
    backend.submit(second)
    assert len(live(sb)) == 2
    assert len(sb.client("ec2").describe_security_groups(
        Filters=[{"Name": f"tag:{JOB_TAG}", "Values": ["job-1"]}])["SecurityGroups"]) == 1
    backend.cleanup("job-1", "us-east-1")
    assert leftovers(sb) == []


@pytest.mark.parametrize("operation", ["PutObject", "CreateRole", "PutRolePolicy", "CreateInstanceProfile",
                                       "AddRoleToInstanceProfile", "CreateSecurityGroup",
                                       "AuthorizeSecurityGroupIngress", "CreatePlacementGroup",
                                       "CreateLaunchTemplate", "CreateFleet"])
def test_a_launch_that_fails_at_any_step_leaves_nothing(env, operation):
    sb, spec, path = env
    backend = Ec2Backend()
    request = backend.prepare(option(), spec, settings(path))
    assert operation in [c.operation for c in request.calls]
    service = next(c.service for c in request.calls if c.operation == operation)

    def fail(**_):
        raise ClientError({"Error": {"Code": "InternalError", "Message": f"injected at {operation}"}}, operation)

    aws.client(service, "us-east-1").meta.events.register(f"before-call.{service}.{operation}", fail)
    with pytest.raises(ClientError):
        backend.submit(request)
    assert leftovers(sb) == []


def test_a_given_security_group_is_used_as_it_is_and_never_deleted(env):
    sb, spec, path = env
    ec2 = sb.client("ec2")
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    own = ec2.create_security_group(GroupName="mine", Description="mine", VpcId=vpc)["GroupId"]
    backend = Ec2Backend()
    request = backend.prepare(option("g5.xlarge"), spec, settings(path, security_group=own))
    assert not [c for c in request.calls if c.operation in ("CreateSecurityGroup", "AuthorizeSecurityGroupIngress")]
    data = next(c for c in request.calls if c.operation == "CreateLaunchTemplate").params["LaunchTemplateData"]
    assert data["SecurityGroupIds"] == [own]
    backend.submit(request)
    backend.cleanup("job-1", "us-east-1")
    assert leftovers(sb) == []
    assert ec2.describe_security_groups(GroupIds=[own])["SecurityGroups"][0]["IpPermissions"] == []


def test_a_fleet_refused_for_a_not_yet_visible_instance_profile_is_asked_again(env, monkeypatch):
    sb, spec, path = env
    monkeypatch.setattr("trainctl.backends.ec2.fleet.PROFILE_RETRY_S", 0.01)
    backend = Ec2Backend()
    request = backend.prepare(option("g5.xlarge"), spec, settings(path))
    tokens = []

    def refuse_first(params, **_):
        tokens.append(params["body"]["ClientToken"])  # the EC2 query body, as it would be sent
        if len(tokens) == 1:  # what EC2 answers while IAM has not propagated the new profile
            return AWSResponse("", 200, {}, None), {"FleetId": "fleet-refused", "Instances": [], "Errors": [{
                "ErrorCode": "InvalidParameterValue", "Lifecycle": "spot",
                "ErrorMessage": "Value (trainctl-job-1) for parameter iamInstanceProfile.name is invalid."}]}
        return None

    aws.client("ec2", "us-east-1").meta.events.register("before-call.ec2.CreateFleet", refuse_first)
    out = backend.submit(request)
    assert len(out["instance_ids"]) == 2 and len(tokens) == 2 and tokens[0] != tokens[1]
    backend.cleanup("job-1", "us-east-1")


def test_spot_dollars_follow_the_prices_in_force():
    from trainctl.backends.ec2.status import integrate as _integrate

    points = [(0.0, 1.0), (3600.0, 2.0), (7200.0, 4.0)]  # $/h changes at t=0, 1 h, 2 h
    assert _integrate(points, 1800.0, 5400.0) == pytest.approx(0.5 * 1.0 + 0.5 * 2.0)
    assert _integrate(points, 7200.0, 10800.0) == pytest.approx(4.0)
    assert _integrate(points, 100.0, 100.0) == 0.0


def test_the_node_policy_is_limited_to_the_job():
    from trainctl.iam.node_role import node_policy

    doc = node_policy("job-1", "bucket", "us-east-1", "123456789012", "trainctl/code/" + "0" * 64 + "/sourcedir.tar.gz")
    actions = {a for s in doc["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert not any(a.endswith("*") for a in actions)
    s3 = [s for s in doc["Statement"] if any(str(a).startswith("s3:") for a in
                                             ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))]
    assert all("job-1" in json.dumps(s) for s in s3)
    tagging = next(s for s in doc["Statement"] if s["Action"] == "ec2:CreateTags")
    assert tagging["Condition"]["StringEquals"] == {"aws:ResourceTag/trainctl:job": "job-1"}


def test_fallback_azs_follow_the_spot_placement_scores(env):
    sb, spec, path = env
    request = Ec2Backend().prepare(option(az="us-east-1a"), spec, settings(path))
    ec2 = sb.client("ec2")
    subnets = {s["SubnetId"]: s["AvailabilityZone"] for s in ec2.describe_subnets()["Subnets"]}
    order = [subnets[c.params["LaunchTemplateConfigs"][0]["Overrides"][0]["SubnetId"]]
             for c in request.calls if c.operation == "CreateFleet"]
    names = {z["ZoneId"]: z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    scores = {names[s["AvailabilityZoneId"]]: s["Score"] for s in ec2.get_spot_placement_scores(
        InstanceTypes=["p4d.24xlarge"], TargetCapacity=2, SingleAvailabilityZone=True,
        RegionNames=["us-east-1"])["SpotPlacementScores"]}
    assert order[0] == "us-east-1a" and len(order) == 3
    assert [scores.get(az, 0) for az in order[1:]] == sorted((scores.get(az, 0) for az in order[1:]), reverse=True)
    offered = {o["Location"] for o in ec2.describe_instance_type_offerings(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": ["p4d.24xlarge"]}])[
        "InstanceTypeOfferings"]}
    best_others = sorted((az for az in offered if az != "us-east-1a" and az in subnets.values()),
                         key=lambda az: (-scores.get(az, 0), az))[:2]
    assert order[1:] == best_others
