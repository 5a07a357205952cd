"""EC2 backend: a plan option launched as a raw instant EC2 Fleet in a cluster placement group.

Resources of a job, all named `trainctl-<job>`, all tagged trainctl:job=<job>, all found again by tag:
the code tarball in S3 (<bucket>/<job>/code/), an IAM role and instance profile that allow only what a node
needs, a security group that admits traffic only from itself (SSH only when asked, from one CIDR), a cluster
placement group, a launch template (IMDSv2 required, encrypted gp3 root volume, the Deep Learning AMI from
its public SSM parameter, EFA on every interface the type has) and an instant `CreateFleet` over the
subnets of one AZ.

All or nothing: a fleet that comes back with fewer than N instances has them terminated and the next AZ
(by Spot placement score) is tried; when no AZ gives N, everything created for the job is deleted again
and `CapacityError` lets the launch fail over to the next plan option.

Nodes run trainctl/bootstrap (user data + agent). Job status lives where the nodes put it: instance
states, CloudWatch Logs /trainctl/<job> (one stream per instance) and S3 markers <job>/status/<status>.
"""
from __future__ import annotations

import base64
import hashlib
import io
import ipaddress
import json
import re
import tarfile
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

from trainctl import aws
from trainctl.backends.base import (JOB_TAG, AwsCall, CapacityError, JobView, LaunchRequest, LaunchSettings,
                                    LogLine, Transition, run_calls, self_only_security_group, tags)
from trainctl.errors import TrainctlError, UsageError

PLATFORM = "ec2"
STATE_TAG = "trainctl:state"            # set to "interrupted" by a node's agent on a Spot notice
TERMINATED_BY_TAG = "trainctl:terminated-by"  # set before trainctl terminates an instance itself
NODES_TAG = "trainctl:nodes"
MARKET_TAG = "trainctl:market"
IAM_PATH = "/trainctl/"
LIVE_STATES = ("pending", "running")
GPU_AMI_PARAMETER = "/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.7-ubuntu-22.04/latest/ami-id"
NEURON_AMI_PARAMETER = "/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id"
ROOT_VOLUME_GIB = 200
MAX_AZ_ATTEMPTS = 3
PROFILE_RETRIES, PROFILE_RETRY_S = 5, 2.0
MASTER_PORT = 29500
CAPACITY_CODES = ("InsufficientInstanceCapacity", "InsufficientCapacity", "MaxSpotInstanceCountExceeded",
                  "SpotMaxPriceTooLow", "Unsupported", "InsufficientFreeAddressesInSubnet",
                  "VcpuLimitExceeded", "InstanceLimitExceeded")
ENTRY_SCRIPTS = {"ddp": "train_ddp.py", "neuron": "train_neuron.py"}


def name_for(job_id: str) -> str:
    return f"trainctl-{job_id}"


def log_group(job_id: str) -> str:
    return f"/trainctl/{job_id}"


def _tag_map(resource: dict) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in resource.get("Tags") or []}


def _job_filter(job_id: str) -> list[dict]:
    return [{"Name": f"tag:{JOB_TAG}", "Values": [job_id]}]


def _code(exc: BaseException) -> str:
    return aws.error_code(exc)


# ----------------------------------------------------------------------------- pure pieces (tested directly)
def node_policy(job_id: str, bucket: str, region: str, account: str) -> dict:
    """What a node may do: its job's S3 prefix, its job's log group, see its peers, mark itself interrupted."""
    group = log_group(job_id)
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "JobPrefix", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
         "Resource": f"arn:aws:s3:::{bucket}/{job_id}/*"},
        {"Sid": "ListJobPrefix", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{bucket}",
         "Condition": {"StringLike": {"s3:prefix": [f"{job_id}/*"]}}},
        {"Sid": "JobLogs", "Effect": "Allow",
         "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
         "Resource": [f"arn:aws:logs:{region}:{account}:log-group:{group}",
                      f"arn:aws:logs:{region}:{account}:log-group:{group}:*"]},
        # EC2's Describe actions cannot be limited to resources; they reveal no data, only metadata.
        {"Sid": "FindPeers", "Effect": "Allow", "Action": "ec2:DescribeInstances", "Resource": "*"},
        {"Sid": "MarkInterrupted", "Effect": "Allow", "Action": "ec2:CreateTags",
         "Resource": f"arn:aws:ec2:{region}:{account}:instance/*",
         "Condition": {"StringEquals": {f"aws:ResourceTag/{JOB_TAG}": job_id},
                       "ForAllValues:StringEquals": {"aws:TagKeys": [STATE_TAG]}}},
    ]}


TRUST_POLICY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}


def network_interfaces(efa_interfaces: int, security_group: str) -> list[dict]:
    """EFA on every network card the type has (p4d 4, trn1.32xlarge 8, p5 32): card 0 is the primary
    interface (device 0); the others are device 1 on their own card, as AWS documents for multi-card types."""
    return [{"NetworkCardIndex": card, "DeviceIndex": 0 if card == 0 else 1, "InterfaceType": "efa",
             "Groups": [security_group], "DeleteOnTermination": True} for card in range(efa_interfaces)]


def nproc_per_node(instance) -> int:
    if instance.accelerator.kind == "neuron":
        # torchrun runs one process per NeuronCore: 2 per Trainium chip (trn1.32xlarge: 32).
        return 2 * instance.accelerator_count
    return max(1, instance.accelerator_count)


def code_tarball(spec: Any) -> tuple[bytes, str]:
    """(tar.gz bytes, entry script) of the job's code: the bundled entrypoints or the user's source_dir.
    Deterministic (sorted, fixed mtimes) so that the same code gives the same sha256 in --dry-run."""
    ep = spec.entrypoint
    if ep.bundled:
        source, script = Path(__file__).resolve().parent.parent / "entrypoints", ENTRY_SCRIPTS[ep.bundled]
    else:
        source, script = Path(ep.source_dir).expanduser(), ep.script
        if not (source / script).is_file():
            raise UsageError(f"entrypoint.script {script!r} not found in source_dir {str(source)!r}")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(source.rglob("*")):
            rel = path.relative_to(source)
            if any(part in ("__pycache__", ".git") for part in rel.parts) or not path.is_file():
                continue
            info = tar.gettarinfo(str(path), arcname=str(rel))
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            with open(path, "rb") as f:
                tar.addfile(info, f)
    # gzip embeds a timestamp; zero it so the bytes (and the sha256 shown) depend on the content only.
    data = bytearray(buf.getvalue())
    data[4:8] = b"\0\0\0\0"
    return bytes(data), script


def script_args(spec: Any) -> list[str]:
    out = []
    for key, value in spec.entrypoint.args.items():
        if key.replace("_", "-") == "checkpoint-dir":
            continue  # the agent owns the node's checkpoint folder (synced to S3)
        out += [f"--{key}", str(value).lower() if isinstance(value, bool) else str(value)]
    return out


# ----------------------------------------------------------------------------- the backend
class Ec2Backend:
    platform = PLATFORM
    # An instant fleet gives all N instances or submit raises CapacityError: nothing to wait for afterwards.
    capacity_at_submit = True

    def __init__(self, client_for: Callable[[str, str], Any] | None = None):
        self.client_for = client_for or (lambda service, region: aws.client(service, region))

    # ------------------------------------------------------------------ prepare (reads only)
    def prepare(self, option: dict, spec: Any, settings: LaunchSettings) -> LaunchRequest:
        from trainctl.bootstrap import render_user_data
        from trainctl.catalog import load_catalog

        job, region = settings.job_id, option["region"]
        instance_type, count, market = option["instance_type"], int(option["count"]), option["market"]
        inst = load_catalog().instance(instance_type)
        if inst is None:
            raise UsageError(f"instance type {instance_type!r} is not in the catalog; see `trainctl catalog`")
        if market not in ("spot", "on-demand"):
            raise UsageError(f"market {market!r}: use spot or on-demand")
        name = name_for(job)
        ec2, notes = self.client_for("ec2", region), []
        account = self.client_for("sts", region).get_caller_identity()["Account"]
        bucket = settings.bucket or f"trainctl-{account}-{region}"
        try:
            self.client_for("s3", region).head_bucket(Bucket=bucket)
        except Exception as e:  # noqa: BLE001 - any failure means we cannot use it
            raise UsageError(f"job bucket {bucket!r} is not reachable ({_code(e)}); create it or pass --bucket") from e
        ami = settings.ami or self._dlami(region, inst.accelerator.kind, notes)

        subnets_by_az, vpc = self._subnets(ec2, settings)
        azs = self._az_order(ec2, region, instance_type, count, market, option.get("availability_zone"),
                             subnets_by_az, notes)
        if not azs:
            raise CapacityError(f"no subnet in {region} is in an AZ that offers {instance_type}")
        existing_sg = self._security_group(ec2, job, vpc)
        existing_lt = self._launch_template(ec2, job)
        running = self._instances(ec2, job, LIVE_STATES)

        code, script = code_tarball(spec)
        code_key = f"{job}/code/sourcedir.tar.gz"
        config = {"job_id": job, "region": region, "bucket": bucket, "code_key": code_key, "script": script,
                  "args": script_args(spec), "nnodes": count, "nproc_per_node": nproc_per_node(inst),
                  "accelerator": inst.accelerator.kind, "efa": inst.efa, "master_port": MASTER_PORT,
                  "shutdown_when_done": True}
        user_data = render_user_data(config)
        job_tags = tags(job)
        calls: list[AwsCall] = [
            AwsCall("s3", "PutObject", {"Bucket": bucket, "Key": code_key, "Body": code,
                                        "Tagging": f"{JOB_TAG}={job}", "ServerSideEncryption": "AES256"},
                    region, why=f"the job's code ({script}) for the nodes to fetch"),
            AwsCall("iam", "CreateRole", {"RoleName": name, "Path": IAM_PATH,
                                          "AssumeRolePolicyDocument": json.dumps(TRUST_POLICY),
                                          "Description": f"trainctl job {job} nodes", "Tags": job_tags},
                    region, ok_errors=("EntityAlreadyExists",), why="the nodes' role"),
            AwsCall("iam", "PutRolePolicy", {"RoleName": name, "PolicyName": "trainctl-node",
                                             "PolicyDocument": json.dumps(node_policy(job, bucket, region, account))},
                    region, why="only the job's S3 prefix, its log group, describing peers"),
            AwsCall("iam", "CreateInstanceProfile", {"InstanceProfileName": name, "Path": IAM_PATH, "Tags": job_tags},
                    region, ok_errors=("EntityAlreadyExists",), why="carries the role to the instances"),
            AwsCall("iam", "AddRoleToInstanceProfile", {"InstanceProfileName": name, "RoleName": name}, region,
                    ok_errors=("LimitExceeded", "EntityAlreadyExists"), why="the profile holds one role"),
        ]
        own_sg = settings.extra.get("security_group")
        if own_sg:
            # The user's group: used as it is (it must already let the nodes talk to each other) and, being
            # untagged for the job, never deleted by cleanup.
            sg = own_sg
            notes.append(f"security group {sg} given: no rules added; it must allow all traffic from itself")
        else:
            if existing_sg:
                notes.append(f"security group {existing_sg} exists for the job; reusing it")
            calls.extend(self_only_security_group(job, name, vpc, region, job_tags, existing_group=existing_sg))
            sg = existing_sg or "${security_group_id}"
            if settings.ssh_cidr:
                cidr = self._ssh_cidr(settings.ssh_cidr)
                calls.append(AwsCall("ec2", "AuthorizeSecurityGroupIngress", {
                    "GroupId": sg, "IpPermissions": [{"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
                                                      "IpRanges": [{"CidrIp": cidr, "Description": "SSH, asked for"}]}],
                    "TagSpecifications": [{"ResourceType": "security-group-rule", "Tags": job_tags}]},
                    region, ok_errors=("InvalidPermission.Duplicate",), why=f"SSH from {cidr} only"))
        calls.append(AwsCall("ec2", "CreatePlacementGroup", {
            "GroupName": name, "Strategy": "cluster",
            "TagSpecifications": [{"ResourceType": "placement-group", "Tags": job_tags}]},
            region, ok_errors=("InvalidPlacementGroup.Duplicate",), why="all nodes on one low-latency network spine"))
        template_data = self._template_data(inst, ami, name, sg, user_data, job_tags)
        if existing_lt:
            notes.append(f"launch template {existing_lt} exists for the job; reusing it")
        else:
            calls.append(AwsCall("ec2", "CreateLaunchTemplate", {
                "LaunchTemplateName": name, "VersionDescription": f"trainctl job {job}",
                "ClientToken": self._token(job, "lt", template_data),
                "LaunchTemplateData": template_data,
                "TagSpecifications": [{"ResourceType": "launch-template",
                                       "Tags": tags(job, **{NODES_TAG: str(count), MARKET_TAG: market})}]},
                region, why="what every node boots with"))
        if len(running) >= count:
            notes.append(f"{len(running)} instances of the job are already running: nothing to launch")
        else:
            nonce = f"{time.time_ns()}"  # a new launch is a new fleet; the same request re-submitted is not
            for i, az in enumerate(azs[:MAX_AZ_ATTEMPTS]):
                params = self.fleet_params(job, name, instance_type, count - len(running), market,
                                           subnets_by_az[az], self._token(job, f"fleet-{az}", nonce))
                calls.append(AwsCall("ec2", "CreateFleet", params, region, outputs={"fleet_id": "FleetId"},
                                     why=(f"{count} x {instance_type} {market} in {az}" if i == 0 else
                                          f"only if the fleet before came back short: {az}")))
            if len(azs) > 1:
                notes.append("fleets after the first run only when the one before got fewer than "
                             f"{count} instances; those are terminated first (all or nothing)")
        notes += [f"AMI {ami}", f"bucket s3://{bucket}/{job}/", f"subnets in {azs[0]}: "
                  f"{', '.join(subnets_by_az[azs[0]])}", f"logs: CloudWatch Logs {log_group(job)}"]
        if inst.efa and inst.efa_interfaces > 1:
            notes.append("several network cards get no public IPv4: the subnet needs a NAT gateway or "
                         "an S3 gateway endpoint for the nodes to reach S3")
        return LaunchRequest(platform=PLATFORM, job_id=job, region=region, option=dict(option),
                             calls=tuple(calls), notes=tuple(notes))

    @staticmethod
    def _token(job: str, what: str, content: Any) -> str:
        digest = hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]
        return f"{job[:40]}-{what[-6:]}-{digest}"[:64]

    @staticmethod
    def _ssh_cidr(cidr: str) -> str:
        try:
            net = ipaddress.ip_network(cidr, strict=False)
        except ValueError as e:
            raise UsageError(f"--ssh-cidr {cidr!r} is not a CIDR (e.g. 203.0.113.7/32)") from e
        if net.prefixlen == 0:
            raise UsageError(f"--ssh-cidr {cidr}: opening SSH to the whole internet is refused; give your own /32")
        return str(net)

    def _dlami(self, region: str, kind: str, notes: list[str]) -> str:
        parameter = NEURON_AMI_PARAMETER if kind == "neuron" else GPU_AMI_PARAMETER
        try:
            ami = self.client_for("ssm", region).get_parameter(Name=parameter)["Parameter"]["Value"]
        except Exception as e:  # noqa: BLE001
            raise TrainctlError(f"cannot read the Deep Learning AMI from SSM {parameter} in {region} "
                                f"({aws.error_summary(e)}); pass --ami") from e
        notes.append(f"AMI from SSM {parameter}")
        return ami

    def _subnets(self, ec2, settings: LaunchSettings) -> tuple[dict[str, list[str]], str]:
        # --subnet (comma-separated) or subnet_ids: the user's own VPC instead of the default one.
        given = settings.extra.get("subnet_ids") or [
            s.strip() for s in str(settings.extra.get("subnet") or "").split(",") if s.strip()]
        if given:
            subnets = ec2.describe_subnets(SubnetIds=list(given))["Subnets"]
        else:
            vpcs = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"]
            if not vpcs:
                raise UsageError("this region has no default VPC; pass the subnets to use (--subnet)")
            subnets = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpcs[0]["VpcId"]]}])["Subnets"]
        vpc_ids = {s["VpcId"] for s in subnets}
        if len(vpc_ids) != 1:
            raise UsageError(f"the subnets must all be in one VPC, not {', '.join(sorted(vpc_ids))}")
        by_az: dict[str, list[str]] = {}
        for s in sorted(subnets, key=lambda s: s["SubnetId"]):
            by_az.setdefault(s["AvailabilityZone"], []).append(s["SubnetId"])
        return by_az, vpc_ids.pop()

    def _az_order(self, ec2, region: str, instance_type: str, count: int, market: str, first: str | None,
                  subnets_by_az: dict[str, list[str]], notes: list[str]) -> list[str]:
        """The plan's AZ first, then the other AZs with subnets that offer the type, best placement score first."""
        offered = {o["Location"] for o in ec2.describe_instance_type_offerings(
            LocationType="availability-zone",
            Filters=[{"Name": "instance-type", "Values": [instance_type]}])["InstanceTypeOfferings"]}
        azs = [az for az in subnets_by_az if az in offered]
        scores: dict[str, int] = {}
        if market == "spot" and len(azs) > 1:
            try:
                names = {z["ZoneId"]: z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
                resp = ec2.get_spot_placement_scores(InstanceTypes=[instance_type], TargetCapacity=count,
                                                     SingleAvailabilityZone=True, RegionNames=[region])
                scores = {names.get(s.get("AvailabilityZoneId"), ""): s["Score"]
                          for s in resp.get("SpotPlacementScores", [])}
            except Exception as e:  # noqa: BLE001 - without scores the AZs keep their name order
                notes.append(f"no Spot placement scores ({aws.error_summary(e)}); AZs in name order")
        azs.sort(key=lambda az: (az != first, -scores.get(az, 0), az))
        if first and first not in azs:
            notes.append(f"the plan's AZ {first} has no usable subnet or does not offer {instance_type}")
        if scores:
            notes.append("AZ order: " + ", ".join(f"{az} (score {scores.get(az, '-')})" for az in azs))
        return azs

    def _template_data(self, inst, ami: str, name: str, sg: str, user_data: str, job_tags: list[dict]) -> dict:
        data: dict[str, Any] = {
            "ImageId": ami, "InstanceType": inst.name,
            "IamInstanceProfile": {"Name": name},
            # IMDSv2 only, and one hop: containers on the node cannot borrow the node's credentials.
            "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled", "HttpPutResponseHopLimit": 1,
                                "InstanceMetadataTags": "disabled"},
            "BlockDeviceMappings": [{"DeviceName": "/dev/sda1", "Ebs": {
                "VolumeSize": ROOT_VOLUME_GIB, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True}}],
            # A node that finishes shuts itself down; that must end the bill, not leave a stopped instance.
            "InstanceInitiatedShutdownBehavior": "terminate",
            "UserData": base64.b64encode(user_data.encode()).decode(),
            "TagSpecifications": [{"ResourceType": r, "Tags": job_tags}
                                  for r in ("instance", "volume", "network-interface")],
        }
        if inst.efa:
            data["NetworkInterfaces"] = network_interfaces(inst.efa_interfaces, sg)
        else:
            data["SecurityGroupIds"] = [sg]
        return data

    @staticmethod
    def fleet_params(job: str, name: str, instance_type: str, count: int, market: str, subnets: list[str],
                     token: str) -> dict:
        """An instant fleet of `count` nodes over one AZ's subnets, all or nothing (MinTargetCapacity).

        Spot settings live here, not in the launch template: EC2 Fleet rejects templates with
        InstanceMarketOptions. Instant fleets are one-time requests; reclaimed nodes terminate."""
        single = {"SingleAvailabilityZone": True, "SingleInstanceType": True, "MinTargetCapacity": count}
        params: dict[str, Any] = {
            "Type": "instant", "ClientToken": token,
            "LaunchTemplateConfigs": [{
                "LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Latest"},
                "Overrides": [{"InstanceType": instance_type, "SubnetId": s,
                               "Placement": {"GroupName": name}} for s in subnets]}],
            "TargetCapacitySpecification": {"TotalTargetCapacity": count,
                                            "DefaultTargetCapacityType": market},
            "TagSpecifications": [{"ResourceType": "fleet", "Tags": tags(job)},
                                  {"ResourceType": "instance", "Tags": tags(job)}],
        }
        if market == "spot":
            params["SpotOptions"] = {"AllocationStrategy": "capacity-optimized",
                                     "InstanceInterruptionBehavior": "terminate", **single}
        else:
            params["OnDemandOptions"] = {"AllocationStrategy": "lowest-price", **single}
        return params

    # ------------------------------------------------------------------ reads shared by the methods
    def _security_group(self, ec2, job: str, vpc: str | None = None) -> str | None:
        filters = _job_filter(job) + ([{"Name": "vpc-id", "Values": [vpc]}] if vpc else [])
        groups = ec2.describe_security_groups(Filters=filters)["SecurityGroups"]
        return groups[0]["GroupId"] if groups else None

    def _launch_template(self, ec2, job: str) -> str | None:
        found = ec2.describe_launch_templates(Filters=_job_filter(job))["LaunchTemplates"]
        return found[0]["LaunchTemplateId"] if found else None

    def _instances(self, ec2, job: str, states: tuple[str, ...] | None = None) -> list[dict]:
        filters = _job_filter(job) + ([{"Name": "instance-state-name", "Values": list(states)}] if states else [])
        out = []
        for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
            out += [i for r in page["Reservations"] for i in r["Instances"]]
        return out

    # ------------------------------------------------------------------ submit
    def submit(self, request: LaunchRequest, progress: Callable[[str], None] | None = None) -> dict:
        say = progress or (lambda message: None)
        job, region = request.job_id, request.region
        ec2 = self.client_for("ec2", region)
        already = [i["InstanceId"] for i in self._instances(ec2, job, LIVE_STATES)]
        outputs: dict[str, Any] = {}
        fleets = [c for c in request.calls if c.operation == "CreateFleet"]
        try:
            for call in request.calls:
                if call.operation == "CreateFleet":
                    continue
                outputs.update(self._run_one(request, call, outputs, say))
            if fleets:
                outputs.update(self._launch_fleets(request, fleets, outputs, say))
            elif already:
                outputs["instance_ids"] = already
        except BaseException as e:
            if already:
                raise  # a re-run of a running job must never tear it down
            say(f"launch failed ({aws.error_summary(e) if not isinstance(e, CapacityError) else e}); "
                "deleting what was created for the job")
            for line in self.cleanup(job, region):
                say(f"removed {line}")
            raise
        return outputs

    def _run_one(self, request: LaunchRequest, call: AwsCall, outputs: dict, say) -> dict:
        from trainctl.backends.base import fill_placeholders

        one = replace(request, calls=(replace(call, params=fill_placeholders(call.params, outputs)),))
        try:
            return run_calls(one, self.client_for, say)
        except Exception as e:
            if call.operation == "CreateSecurityGroup" and _code(e) == "InvalidGroup.Duplicate":
                # A re-run after a crash between prepare and here: the group is ours, find it by tag.
                sg = self._security_group(self.client_for("ec2", call.region), request.job_id,
                                          call.params.get("VpcId"))
                if sg:
                    return {"security_group_id": sg}
            if call.operation == "CreateLaunchTemplate" and _code(e).startswith("InvalidLaunchTemplateName.Already"):
                return {}
            raise

    def _launch_fleets(self, request: LaunchRequest, fleets: list[AwsCall], outputs: dict, say) -> dict:
        ec2 = self.client_for("ec2", request.region)
        shortfalls = []
        for call in fleets:
            params = fill_placeholders_local(call.params, outputs)
            want = int(params["TargetCapacitySpecification"]["TotalTargetCapacity"])
            az = self._subnet_az(ec2, params)
            say(f"ec2:CreateFleet ({want} x {params['LaunchTemplateConfigs'][0]['Overrides'][0]['InstanceType']} "
                f"{params['TargetCapacitySpecification']['DefaultTargetCapacityType']} in {az})")
            got, errors, fleet_id = self.create_fleet(ec2, params)
            if len(got) >= want:
                say(f"fleet {fleet_id}: {len(got)} of {want} instances in {az}")
                return {"fleet_id": fleet_id, "instance_ids": got, "availability_zone": az}
            why = "; ".join(sorted(set(errors))) or "no error given"
            more = call is not fleets[-1]
            say(f"fleet in {az} got {len(got)} of {want} ({why})"
                + (f"; terminating {', '.join(got)}" if got else "") + ("; trying the next AZ" if more else ""))
            self.terminate(ec2, got, fleet_id)
            shortfalls.append(f"{az}: {len(got)} of {want} ({why})")
        raise CapacityError("no AZ gave all the instances: " + "; ".join(shortfalls))

    @staticmethod
    def _subnet_az(ec2, params: dict) -> str:
        subnet = params["LaunchTemplateConfigs"][0]["Overrides"][0]["SubnetId"]
        return ec2.describe_subnets(SubnetIds=[subnet])["Subnets"][0]["AvailabilityZone"]

    def create_fleet(self, ec2, params: dict) -> tuple[list[str], list[str], str | None]:
        """(live instance ids, error codes, fleet id). Counts only instances that are alive now: a replayed
        ClientToken answers with the instances of the first call, which may be gone since."""
        for attempt in range(PROFILE_RETRIES + 1):
            resp = ec2.create_fleet(**params)
            ids = [i for group in resp.get("Instances", []) for i in group.get("InstanceIds", [])]
            errors = [e.get("ErrorCode", "?") for e in resp.get("Errors", [])]
            messages = " ".join(e.get("ErrorMessage", "") for e in resp.get("Errors", []))
            if ids or "iamInstanceProfile" not in messages or attempt == PROFILE_RETRIES:
                break
            # IAM is eventually consistent: a profile made seconds ago may not be visible to EC2 yet. Ask
            # again under a new token (the old one would replay this answer).
            time.sleep(PROFILE_RETRY_S * (attempt + 1))
            params = {**params, "ClientToken": f"{params['ClientToken'][:60]}-p{attempt + 1}"}
        live = []
        if ids:
            described = ec2.describe_instances(InstanceIds=ids)["Reservations"]
            live = [i["InstanceId"] for r in described for i in r["Instances"] if i["State"]["Name"] in LIVE_STATES]
        return live, errors, resp.get("FleetId")

    def terminate(self, ec2, instance_ids: list[str], fleet_id: str | None = None) -> None:
        """Terminate instances trainctl itself gives up on, tagged first so they never count as interruptions."""
        if instance_ids:
            ec2.create_tags(Resources=instance_ids, Tags=[{"Key": TERMINATED_BY_TAG, "Value": "trainctl"}])
            ec2.terminate_instances(InstanceIds=instance_ids)
        if fleet_id:
            try:
                ec2.delete_fleets(FleetIds=[fleet_id], TerminateInstances=True)
            except Exception as e:  # noqa: BLE001
                # The instances are terminated above; an instant fleet left is only a record. moto (the
                # sandbox) answers InvalidParameterCombination when the fleet has no instance left to end.
                if _code(e) not in ("InvalidFleetId.NotFound", "InvalidParameterCombination"):
                    raise

    # ------------------------------------------------------------------ describe / logs / stop / recover
    def _markers(self, job_id: str, region: str, bucket: str | None) -> dict[str, str]:
        """The S3 status markers the nodes (completed, failed) and `stop` (stopped) leave: name -> text."""
        if not bucket:
            return {}
        s3 = self.client_for("s3", region)
        try:
            found = s3.list_objects_v2(Bucket=bucket, Prefix=f"{job_id}/status/").get("Contents", [])
        except Exception:  # noqa: BLE001 - no bucket, no markers
            return {}
        return {o["Key"].rsplit("/", 1)[-1]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read().decode()
                for o in found}

    def _job_config(self, ec2, job_id: str) -> dict:
        """The node config inside the job's launch template user data (bucket, nnodes, args), if it still exists."""
        lt = self._launch_template(ec2, job_id)
        if not lt:
            return {}
        data = ec2.describe_launch_template_versions(LaunchTemplateId=lt, Versions=["$Latest"])[
            "LaunchTemplateVersions"][0]["LaunchTemplateData"]
        text = base64.b64decode(data.get("UserData", "")).decode(errors="replace")
        start, end = text.find("<<'TRAINCTL_CONFIG'\n"), text.find("\nTRAINCTL_CONFIG\n")
        if start < 0 or end < 0:
            return {}
        return {**json.loads(text[start + len("<<'TRAINCTL_CONFIG'\n"):end]), "launch_template_id": lt,
                "market": _tag_map(ec2.describe_launch_templates(LaunchTemplateIds=[lt])["LaunchTemplates"][0]).get(
                    MARKET_TAG)}

    def _bucket(self, region: str, config: dict) -> str:
        if config.get("bucket"):
            return config["bucket"]
        account = self.client_for("sts", region).get_caller_identity()["Account"]
        return f"trainctl-{account}-{region}"

    @staticmethod
    def _interrupted(inst: dict) -> bool:
        """Gone without trainctl ending it: a Spot reclaim, or a node lost otherwise (ended from the console,
        by another tool). A node that finished and shut itself down is not; nor one trainctl terminated."""
        t = _tag_map(inst)
        if inst["State"]["Name"] not in ("shutting-down", "terminated") or TERMINATED_BY_TAG in t:
            return False
        reason = (inst.get("StateReason") or {}).get("Code", "")
        if t.get(STATE_TAG) == "interrupted" or reason.startswith("Server."):
            return True  # Server.SpotInstanceTermination, or EC2 ended it for another reason of its own
        return reason != "Client.InstanceInitiatedShutdown"

    def instance_costs(self, ec2, instances: list[dict], region: str, now: float) -> dict[str, float]:
        """Dollars per instance so far: Spot instances at the Spot prices in force while they ran (price
        history of their type and AZ), On-Demand ones at the catalog's On-Demand price."""
        from trainctl.catalog import load_catalog

        cat, out, history = load_catalog(), {}, {}
        for inst in instances:
            start = inst["LaunchTime"].timestamp()
            end = _ended(inst) or now
            end = max(end, start)
            itype, az = inst["InstanceType"], inst["Placement"]["AvailabilityZone"]
            if inst.get("InstanceLifecycle") != "spot":
                price = cat.on_demand_price("ec2", region, itype)
                out[inst["InstanceId"]] = (end - start) / 3600 * (price.usd_per_hour if price else 0.0)
                continue
            key = (itype, az)
            if key not in history:
                points = []
                pages = ec2.get_paginator("describe_spot_price_history").paginate(
                    InstanceTypes=[itype], AvailabilityZone=az, ProductDescriptions=["Linux/UNIX"],
                    StartTime=datetime.fromtimestamp(start, timezone.utc) - timedelta(days=1),
                    EndTime=datetime.fromtimestamp(now, timezone.utc))
                for page in pages:
                    points += [(p["Timestamp"].timestamp(), float(p["SpotPrice"])) for p in page["SpotPriceHistory"]]
                history[key] = sorted(points)
            out[inst["InstanceId"]] = _integrate(history[key], start, end)
        return out

    def describe(self, job_id: str, region: str) -> JobView:
        ec2, now = self.client_for("ec2", region), time.time()
        instances = sorted(self._instances(ec2, job_id), key=lambda i: i["LaunchTime"])
        config = self._job_config(ec2, job_id)
        markers = self._markers(job_id, region, self._bucket(region, config))
        nodes = int(config.get("nnodes") or 0) or None
        alive = [i for i in instances
                 if i["State"]["Name"] in LIVE_STATES and _tag_map(i).get(STATE_TAG) != "interrupted"]
        interrupted = [i for i in instances if self._interrupted(i)]
        costs = self.instance_costs(ec2, instances, region, now)
        failure = None
        if "completed" in markers:
            status, secondary = "Completed", "Completed"
        elif "failed" in markers:
            status, secondary, failure = "Failed", "Failed", markers["failed"]
        elif "stopped" in markers:
            status, secondary = ("Stopping", "Stopping") if alive else ("Stopped", "Stopped")
        elif not instances:
            status, secondary = "Failed", "Failed"
            failure = "no instance of the job exists (never launched, or deleted)"
        elif not alive and not nodes:
            status, secondary = "Stopped", "Stopped"
            failure = "the job's instances and launch template are gone (removed by `trainctl down`?)"
        elif nodes and len(alive) < nodes:
            status, secondary = "InProgress", "Interrupted"
        elif any(i["State"]["Name"] == "pending" for i in alive):
            status, secondary = "InProgress", "Starting"
        else:
            status, secondary = "InProgress", "Training"
        started = instances[0]["LaunchTime"].timestamp() if instances else None
        ended = None
        if status in ("Completed", "Failed", "Stopped") and instances:
            ended = max(max(_ended(i) or now, i["LaunchTime"].timestamp()) for i in instances)
        wall = int((ended or now) - started) if started else None
        cost = round(sum(costs.values()), 6)
        itype = instances[0]["InstanceType"] if instances else None
        market = config.get("market") or (("spot" if instances[0].get("InstanceLifecycle") == "spot"
                                           else "on-demand") if instances else None)
        billable = None
        if wall is not None and itype and nodes:
            from trainctl.catalog import load_catalog

            od = load_catalog().on_demand_price("ec2", region, itype)
            if od and od.usd_per_hour > 0:
                # SageMaker's definition: the seconds that, at the On-Demand rate of all the nodes, cost what was
                # really spent. So `watch` shows the true dollars and the true saving over On-Demand.
                billable = int(round(cost / (od.usd_per_hour * nodes) * 3600))
        transitions = [Transition("Launched", started, None, f"{len(instances)} instances so far")] if started else []
        transitions += [Transition("Interrupted", i["LaunchTime"].timestamp(), None,
                                   f"{i['InstanceId']} in {i['Placement']['AvailabilityZone']}, "
                                   f"${costs.get(i['InstanceId'], 0):.4f}") for i in interrupted]
        transitions.append(Transition(secondary, None, None, ""))
        hps = {}
        args = config.get("args") or []
        for key, value in zip(args[::2], args[1::2]):
            hps[key.lstrip("-")] = value
        raw = {"HyperParameters": hps, "cost_usd": cost, "markers": markers, "nodes": nodes,
               "instances": [{"instance_id": i["InstanceId"], "state": i["State"]["Name"],
                              "availability_zone": i["Placement"]["AvailabilityZone"],
                              "private_ip": i.get("PrivateIpAddress"), "lifecycle": i.get("InstanceLifecycle",
                                                                                          "on-demand"),
                              "launched": i["LaunchTime"].timestamp(), "cost_usd": round(costs[i["InstanceId"]], 6),
                              "interrupted": self._interrupted(i), "tags": _tag_map(i)} for i in instances],
               "interruptions": [{"instance_id": i["InstanceId"], "cost_usd": round(costs[i["InstanceId"]], 6)}
                                 for i in interrupted]}
        return JobView(job_id=job_id, platform=PLATFORM, region=region, status=status, secondary_status=secondary,
                       transitions=tuple(transitions), hosts=tuple(i["InstanceId"] for i in alive),
                       training_seconds=wall, billable_seconds=billable, interruptions=len(interrupted),
                       failure_reason=failure, instance_type=itype, count=nodes, market=market,
                       started_at=started, ended_at=ended, raw=raw)

    def logs(self, job_id: str, region: str, cursor: dict | None) -> tuple[list[LogLine], dict]:
        """New lines of every instance's stream in /trainctl/<job> since the cursor (time, ids seen at it)."""
        logs = self.client_for("logs", region)
        cursor = dict(cursor or {"t": 0, "seen": []})
        try:
            streams = [s["logStreamName"] for s in logs.describe_log_streams(logGroupName=log_group(job_id))[
                "logStreams"]]
        except Exception as e:  # noqa: BLE001
            if _code(e) == "ResourceNotFoundException":
                return [], cursor  # no node has started yet
            raise
        lines, seen = [], set(cursor.get("seen", []))
        for i in range(0, len(streams), 100):  # FilterLogEvents takes at most 100 stream names
            kwargs = {"logGroupName": log_group(job_id), "logStreamNames": streams[i:i + 100],
                      "startTime": int(cursor.get("t", 0))}
            while True:
                page = logs.filter_log_events(**kwargs)
                for ev in page.get("events", []):
                    if ev["eventId"] not in seen:
                        lines.append((ev["timestamp"], ev["eventId"], LogLine(ev["timestamp"], ev["logStreamName"],
                                                                              ev["message"])))
                if not page.get("nextToken"):
                    break
                kwargs["nextToken"] = page["nextToken"]
        lines.sort(key=lambda x: (x[0], x[1]))
        if lines:
            last = lines[-1][0]
            cursor = {"t": last, "seen": [eid for t, eid, _ in lines if t == last]
                      + ([e for e in seen] if last == cursor.get("t") else [])}
        return [line for _, _, line in lines], cursor

    def stop(self, job_id: str, region: str) -> None:
        """Mark the job stopped (so no node starts it again) and terminate its instances; the agents SIGTERM
        the training on shutdown, which checkpoints it. Resources stay until `trainctl down`."""
        ec2 = self.client_for("ec2", region)
        bucket = self._bucket(region, self._job_config(ec2, job_id))
        self.client_for("s3", region).put_object(Bucket=bucket, Key=f"{job_id}/status/stopped",
                                                 Body=f"stopped by trainctl at {time.time():.0f}".encode())
        self.terminate(ec2, [i["InstanceId"] for i in self._instances(ec2, job_id, LIVE_STATES)])

    def recover(self, job_id: str, region: str, progress: Callable[[str], None] | None = None) -> dict:
        """Relaunch the capacity a job lost (reclaimed Spot nodes): the missing count in the same AZ first (same
        placement group and launch template); when that AZ has no room, the whole job moves to the next AZ that
        can hold all N. The nodes resume from the last checkpoint in S3 by themselves.

        Returns {"launched": [ids], "availability_zone", "moved": bool, "interruptions": [{instance_id,
        cost_usd}] (every interruption of the job so far), "missing": n before, "messages": [..]}.
        A job that is finished, stopped or whole launches nothing."""
        messages: list[str] = []

        def say(m: str) -> None:
            messages.append(m)
            if progress:
                progress(m)

        ec2 = self.client_for("ec2", region)
        view = self.describe(job_id, region)
        result = {"launched": [], "availability_zone": None, "moved": False, "missing": 0,
                  "interruptions": view.raw.get("interruptions", []), "messages": messages}
        if view.finished or view.status == "Stopping" or not view.count:
            return result
        name = name_for(job_id)
        alive = [i for i in self._instances(ec2, job_id, LIVE_STATES) if _tag_map(i).get(STATE_TAG) != "interrupted"]
        missing = view.count - len(alive)
        result["missing"] = missing
        if missing <= 0:
            return result
        config = self._job_config(ec2, job_id)
        market = config.get("market") or view.market or "spot"
        itype = view.instance_type
        sg = self._security_group(ec2, job_id)
        vpc = ec2.describe_security_groups(GroupIds=[sg])["SecurityGroups"][0]["VpcId"]
        by_az: dict[str, list[str]] = {}
        for s in ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]:
            by_az.setdefault(s["AvailabilityZone"], []).append(s["SubnetId"])
        home = alive[0]["Placement"]["AvailabilityZone"] if alive else (
            view.raw["instances"][-1]["availability_zone"] if view.raw.get("instances") else None)
        if alive:
            # The placement group holds the survivors: same AZ first, only the missing nodes.
            token = self._token(job_id, f"r-{home}", [i["InstanceId"] for i in self._instances(ec2, job_id)])
            params = self.fleet_params(job_id, name, itype, missing, market, sorted(by_az.get(home, [])), token)
            say(f"relaunching {missing} x {itype} {market} in {home}")
            got, errors, fleet_id = self.create_fleet(ec2, params)
            if len(got) >= missing:
                say(f"fleet {fleet_id}: {', '.join(got)} in {home}; the nodes resume from the last checkpoint")
                return {**result, "launched": got, "availability_zone": home}
            say(f"{home} has room for {len(got)} of {missing} ({'; '.join(sorted(set(errors)))}); "
                f"moving the whole job to another AZ")
            self.terminate(ec2, got, fleet_id)
            # The survivors' agents get SIGTERM at shutdown: they checkpoint and sync before going.
            self.terminate(ec2, [i["InstanceId"] for i in alive])
        azs = self._az_order(ec2, region, itype, view.count, market, None,
                             {az: s for az, s in by_az.items() if az != home or not alive}, [])
        for az in azs[:MAX_AZ_ATTEMPTS]:
            token = self._token(job_id, f"m-{az}", [i["InstanceId"] for i in self._instances(ec2, job_id)])
            params = self.fleet_params(job_id, name, itype, view.count, market, sorted(by_az[az]), token)
            say(f"launching {view.count} x {itype} {market} in {az}")
            got, errors, fleet_id = self.create_fleet(ec2, params)
            if len(got) >= view.count:
                say(f"fleet {fleet_id}: {', '.join(got)} in {az}; the nodes resume from the last checkpoint")
                return {**result, "launched": got, "availability_zone": az, "moved": True}
            say(f"{az} gave {len(got)} of {view.count} ({'; '.join(sorted(set(errors)))})")
            self.terminate(ec2, got, fleet_id)
        raise CapacityError(f"no capacity to recover {job_id}: " + "; ".join(messages[-3:]))

    # ------------------------------------------------------------------ cleanup / down
    def cleanup(self, job_id: str, region: str) -> list[str]:
        """Delete everything tagged for the job, in dependency order; safe to repeat; returns what went."""
        ec2, iam = self.client_for("ec2", region), self.client_for("iam", region)
        removed: list[str] = []
        live = [i["InstanceId"] for i in self._instances(ec2, job_id, ("pending", "running", "stopping", "stopped"))]
        if live:
            self.terminate(ec2, live)
            removed += [f"instance {i}" for i in live]
            ec2.get_waiter("instance_terminated").wait(InstanceIds=live, WaiterConfig={"Delay": 5, "MaxAttempts": 120})
        for fleet in ec2.describe_fleets().get("Fleets", []):
            if _tag_map(fleet).get(JOB_TAG) == job_id and not fleet.get("FleetState", "").startswith("deleted"):
                self.terminate(ec2, [], fleet["FleetId"])
                removed.append(f"fleet {fleet['FleetId']}")
        for lt in ec2.describe_launch_templates(Filters=_job_filter(job_id))["LaunchTemplates"]:
            ec2.delete_launch_template(LaunchTemplateId=lt["LaunchTemplateId"])
            removed.append(f"launch template {lt['LaunchTemplateName']} ({lt['LaunchTemplateId']})")
        for pg in ec2.describe_placement_groups(Filters=_job_filter(job_id))["PlacementGroups"]:
            self._retry_in_use(lambda: ec2.delete_placement_group(GroupName=pg["GroupName"]),
                               ("InvalidPlacementGroup.InUse",))
            removed.append(f"placement group {pg['GroupName']}")
        for sg in ec2.describe_security_groups(Filters=_job_filter(job_id))["SecurityGroups"]:
            # Network interfaces of just-terminated instances release the group a little later on AWS.
            self._retry_in_use(lambda: ec2.delete_security_group(GroupId=sg["GroupId"]), ("DependencyViolation",))
            removed.append(f"security group {sg['GroupId']}")
        removed += self._cleanup_iam(iam, job_id)
        return removed

    @staticmethod
    def _retry_in_use(fn: Callable[[], Any], codes: tuple[str, ...], attempts: int = 30) -> None:
        for attempt in range(attempts):
            try:
                fn()
                return
            except Exception as e:  # noqa: BLE001
                if _code(e) not in codes or attempt == attempts - 1:
                    raise
                time.sleep(min(10.0, 0.5 * 2 ** attempt))

    def _cleanup_iam(self, iam, job_id: str) -> list[str]:
        removed = []

        def role_is_ours(name: str) -> bool:
            return any(t["Key"] == JOB_TAG and t["Value"] == job_id for t in iam.list_role_tags(RoleName=name)["Tags"])

        for page in iam.get_paginator("list_instance_profiles").paginate(PathPrefix=IAM_PATH):
            for profile in page["InstanceProfiles"]:
                name = profile["InstanceProfileName"]
                roles = [r["RoleName"] for r in profile.get("Roles", [])]
                # Decided through the role's tags (a profile's own need ListInstanceProfileTags, which moto
                # lacks); a profile without a role is what a launch that failed right after creating it leaves.
                if not (any(role_is_ours(r) for r in roles) or (not roles and name == name_for(job_id))):
                    continue
                for role in roles:
                    iam.remove_role_from_instance_profile(InstanceProfileName=name, RoleName=role)
                iam.delete_instance_profile(InstanceProfileName=name)
                removed.append(f"instance profile {name}")
        for page in iam.get_paginator("list_roles").paginate(PathPrefix=IAM_PATH):
            for role in page["Roles"]:
                name = role["RoleName"]
                if not role_is_ours(name):
                    continue
                for policy in iam.list_role_policies(RoleName=name)["PolicyNames"]:
                    iam.delete_role_policy(RoleName=name, PolicyName=policy)
                for policy in iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]:
                    iam.detach_role_policy(RoleName=name, PolicyArn=policy["PolicyArn"])
                for profile in iam.list_instance_profiles_for_role(RoleName=name)["InstanceProfiles"]:
                    iam.remove_role_from_instance_profile(InstanceProfileName=profile["InstanceProfileName"],
                                                          RoleName=name)
                iam.delete_role(RoleName=name)
                removed.append(f"role {name}")
        return removed


_ENDED = re.compile(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:GMT|UTC)\)")


def _ended(inst: dict) -> float | None:
    """When a terminated instance ended: EC2 writes it in StateTransitionReason, "User initiated (... GMT)"."""
    if inst["State"]["Name"] not in ("shutting-down", "terminated"):
        return None
    m = _ENDED.search(inst.get("StateTransitionReason") or "")
    if not m:
        return inst["LaunchTime"].timestamp()
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()


def _integrate(points: list[tuple[float, float]], start: float, end: float) -> float:
    """Dollars of one instance from `start` to `end` under a step function of (time, $/h) price changes."""
    if end <= start or not points:
        return 0.0
    total = 0.0
    price = next((p for t, p in reversed(points) if t <= start), points[0][1])
    t0 = start
    for t, p in points:
        if t <= start:
            continue
        if t >= end:
            break
        total += (t - t0) / 3600 * price
        t0, price = t, p
    return total + (end - t0) / 3600 * price


def fill_placeholders_local(params: dict, outputs: dict) -> dict:
    from trainctl.backends.base import fill_placeholders

    return fill_placeholders(params, outputs)
