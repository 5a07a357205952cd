"""What an EC2 launch asks AWS for: `prepare` reads (account, bucket, AMI, subnets, AZ order, what exists
for the job) and returns the exact calls, writing nothing.

The calls: the code in S3 (<bucket>/<job>/code/), an IAM role and instance profile that allow only what a
node needs, a security group that admits traffic only from itself (SSH only when asked, from one CIDR), a
cluster placement group, a launch template (IMDSv2 required, encrypted gp3 root volume, the Deep Learning
AMI from its public SSM parameter, EFA on every card the type has) and one instant `CreateFleet` per AZ as
alternatives: all or nothing, the next AZ only when the one before came back short.
"""
from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import time
from typing import Any

from trainctl.catalog.images import DLAMI_PARAMETERS
from trainctl.aws import clients as aws
from trainctl.backends.job_args import as_command_line, entrypoint_args, layout_note, total_steps
from trainctl.naming import resources as naming
from trainctl.aws import network, zones
from trainctl.backends.data_checks import refuse_bad_data
from trainctl.backends.data_keys import data_keys
from trainctl.backends.ec2 import data as job_data, image_facts, pip_reach, spot_role
from trainctl.backends.ec2.agent_upload import agent_calls
from trainctl.backends.ec2.node_recovery import node_config as recovery_config
from trainctl.backends.ec2.capacity_block_launch import node_config as block_node_config
from trainctl.backends.base import Alternatives, AwsCall, CapacityError, LaunchRequest, LaunchSettings, tags
from trainctl.backends.ec2.placement_groups import placement_group_calls
from trainctl.backends.ec2.common import (LIVE_STATES, MARKET_TAG, MAX_AZ_ATTEMPTS, NODES_TAG, PLATFORM, group_for, instances, launch_template, log_group, name_for, security_group)
from trainctl.backends.security_group import self_only_security_group
from trainctl.errors import TrainctlError, UsageError
from trainctl.backends.ec2.log_retention import DEFAULT_LOG_RETENTION_DAYS, LOG_RETENTION_DAYS, log_group_calls  # noqa: F401
from trainctl.iam.node_role import EC2_TRUST, node_policy
from trainctl.backends import budget
from trainctl.backends.launch_limits import boundary, max_runtime_s
from trainctl.naming.tags import SPEC_TAG

GPU_AMI_PARAMETER, NEURON_AMI_PARAMETER = DLAMI_PARAMETERS["gpu"], DLAMI_PARAMETERS["neuron"]  # catalog/images.py
ROOT_VOLUME_GIB = 200
MASTER_PORT = 29500
FLEET_GROUP = Alternatives(
    "fleet", accept="every instance asked for is pending or running (all or nothing)",
    otherwise="terminate what the fleet got (tagged trainctl:terminated-by) and make the next AZ's fleet",
    exhausted="no AZ gave all the instances")
# ----------------------------------------------------------------------------- pure pieces (tested directly)
def stopping_condition(option, max_runtime_hours: float | None, now: float | None = None) -> dict:
    """SageMaker's MaxRuntimeInSeconds for EC2 jobs: the same default (twice the expected hours plus 30
    minutes), enforced by the node agent against a wall-clock end written into the node config."""
    import time


    seconds = max_runtime_s(option, max_runtime_hours)
    return {"max_runtime_s": seconds, "not_after": int((time.time() if now is None else now) + seconds)}


def network_interfaces(efa_interfaces: int, group: str) -> list[dict]:
    """EFA on every network card the type has (p4d 4, trn1.32xlarge 8, p5 32): card 0 is the primary
    interface (device 0); the others are device 1 on their own card, as AWS documents for multi-card types."""
    return [{"NetworkCardIndex": card, "DeviceIndex": 0 if card == 0 else 1, "InterfaceType": "efa",
             "Groups": [group], "DeleteOnTermination": True} for card in range(efa_interfaces)]


# EFA devices with RDMA read: libfabric's EFA provider aborts every process that sets FI_EFA_USE_DEVICE_RDMA=1 on
# a device without it (fi_efa(7), FI_EFA_USE_DEVICE_RDMA). EC2 User Guide, EFA supported instance types (RDMA
# read column); the SageMaker SDK's torchrun driver sets the variable only for its SM_EFA_RDMA_INSTANCES (p4d,
# p4de, trn1.32xlarge), to which the guide adds p5 and trn1n. g5/g6 (8xlarge and larger) and p3dn have none.
EFA_RDMA_READ_TYPES = frozenset({"p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
                                 "trn1.32xlarge", "trn1n.32xlarge"})


def efa_rdma_read(inst) -> bool:
    return inst.efa and inst.name in EFA_RDMA_READ_TYPES


def no_public_ipv4(inst) -> bool:
    """EC2 auto-assigns no public IPv4 to an instance launched with more than one network interface (EC2 User
    Guide, "using-instance-addressing"); the template gives a multi-card type one EFA interface per card."""
    return inst.efa and inst.efa_interfaces > 1


def common_shape(catalog, option):
    """The priced type, with only the EFA interfaces every type of the option has (a flexible layout's launch
    template serves every member: EFA only when all of them have it)."""
    import dataclasses

    members = [catalog.instance(t) for t in option.instance_types or (option.instance_type,)]
    missing = [t for t, m in zip(option.instance_types, members) if m is None]
    inst = catalog.instance(option.instance_type)
    if inst is None or missing:
        raise UsageError(f"instance type {(missing or [option.instance_type])[0]!r} is not in the catalog; see "
                         "`trainctl catalog`")
    return dataclasses.replace(inst, efa_interfaces=min(m.efa_interfaces for m in members))


def nproc_per_node(instance) -> int:
    if instance.accelerator.kind == "neuron":
        # torchrun runs one process per NeuronCore: 2 per Trainium chip (trn1.32xlarge: 32).
        return 2 * instance.accelerator_count
    return max(1, instance.accelerator_count)


def token(job: str, what: str, content: Any) -> str:
    digest = hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return f"{job[:40]}-{what[-6:]}-{digest}"[:64]


def ssh_cidr(cidr: str) -> str:
    try:
        net = ipaddress.ip_network(cidr, strict=False)
    except ValueError as e:
        raise UsageError(f"--ssh-cidr {cidr!r} is not a CIDR (e.g. 203.0.113.7/32)") from e
    if net.prefixlen == 0:
        raise UsageError(f"--ssh-cidr {cidr}: opening SSH to the whole internet is refused; give your own /32")
    return str(net)


def template_data(inst, ami: str, name: str, group: str, user_data: str, job_tags: list[dict],
                  root_device: str, root_gib: int | None = None) -> dict:
    """`inst`: the type, or for a flexible layout what every member has (`common_shape`): EFA only when all do.
    `root_device`: the AMI's RootDeviceName (image_facts.py): a mapping under another name adds a volume."""
    data: dict[str, Any] = {
        "ImageId": ami, "InstanceType": inst.name,
        "IamInstanceProfile": {"Name": name},
        # IMDSv2 only, and one hop: containers on the node cannot borrow the node's credentials.
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled", "HttpPutResponseHopLimit": 1,
                            "InstanceMetadataTags": "disabled"},
        "BlockDeviceMappings": [{"DeviceName": root_device, "Ebs": {
            "VolumeSize": root_gib or ROOT_VOLUME_GIB, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True}}],
        # A node that finishes shuts itself down; that must end the bill, not leave a stopped instance.
        "InstanceInitiatedShutdownBehavior": "terminate",
        "UserData": base64.b64encode(user_data.encode()).decode(),
        "TagSpecifications": [{"ResourceType": r, "Tags": job_tags} for r in ("instance", "volume", "network-interface")],
    }
    if inst.efa:
        data["NetworkInterfaces"] = network_interfaces(inst.efa_interfaces, group)
    else:
        data["SecurityGroupIds"] = [group]
    return data


def fleet_params(job: str, name: str, instance_type: str, count: int, market: str, subnets: list[str],
                 client_token: str, types: tuple[str, ...] | list[str] = (),
                 max_total_price: float | None = None, group: str | None = None) -> dict:
    """An instant fleet of `count` identical nodes over one AZ's subnets, all or nothing (MinTargetCapacity), in
    the cluster placement group `group` (default: the job's, named as its launch template).

    A flexible layout (`types`, in priority order) gets an override per type and subnet with its priority,
    `capacity-optimized-prioritized` (Spot; AWS honours priorities "on a best-effort basis, but optimizes for
    capacity first") or `prioritized` (On-Demand), and MaxTotalPrice as a hard cap on On-Demand only. SingleInstanceType stays:
    a mix would run at its slowest node's pace and bill its dearest (planner/flexible.py).
    Spot settings live here, not in the launch template: EC2 Fleet rejects templates with
    InstanceMarketOptions. Instant fleets are one-time requests; reclaimed nodes terminate."""
    types = list(types) or [instance_type]
    flexible = len(types) > 1
    single = {"SingleAvailabilityZone": True, "SingleInstanceType": True, "MinTargetCapacity": count}
    # On-Demand only: for Spot, AWS "do[es] not recommend using this parameter because it can lead to increased
    # interruptions" (EC2 API Reference, SpotOptionsRequest.MaxTotalPrice), and the plan prices each member anyway
    cap = {"MaxTotalPrice": f"{max_total_price:.4f}"} if max_total_price and market != "spot" else {}
    params: dict[str, Any] = {
        "Type": "instant", "ClientToken": client_token,
        "LaunchTemplateConfigs": [{
            "LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Latest"},
            "Overrides": [{"InstanceType": t, "SubnetId": s, "Placement": {"GroupName": group or name},
                           **({"Priority": priority} if flexible else {})}
                          for priority, t in enumerate(types) for s in subnets]}],
        "TargetCapacitySpecification": {"TotalTargetCapacity": count, "DefaultTargetCapacityType": market},
        "TagSpecifications": [{"ResourceType": "fleet", "Tags": tags(job)},
                              {"ResourceType": "instance", "Tags": tags(job)}],
    }
    if market == "spot":
        params["SpotOptions"] = {"AllocationStrategy": "capacity-optimized-prioritized" if flexible else
                                 "capacity-optimized", "InstanceInterruptionBehavior": "terminate", **single}
    else:
        params["OnDemandOptions"] = {"AllocationStrategy": "prioritized" if flexible else "lowest-price", **single,
                                     **cap}
    return params


def fleet_call(job: str, instance_type: str, count: int, market: str, az: str, subnets: list[str],
               client_token: str, region: str, types: tuple[str, ...] = (),
               max_total_price: float | None = None, group: str | None = None) -> AwsCall:
    params = fleet_params(job, name_for(job), instance_type, count, market, subnets, client_token, types,
                          max_total_price, group)
    what = instance_type if len(types) < 2 else f"identical nodes of any of {', '.join(types)}"
    return AwsCall("ec2", "CreateFleet", params, region, alternative_of=FLEET_GROUP.name,
                   about={"availability_zone": az}, why=f"{count} x {what} {market} in {az}")


# ----------------------------------------------------------------------------- reads
def dlami(client_for, region: str, kind: str, notes: list[str]) -> str:
    parameter = NEURON_AMI_PARAMETER if kind == "neuron" else GPU_AMI_PARAMETER
    try:
        ami = client_for("ssm", region).get_parameter(Name=parameter)["Parameter"]["Value"]
    except Exception as e:  # noqa: BLE001
        raise TrainctlError(f"cannot read the Deep Learning AMI from SSM {parameter} in {region} "
                            f"({aws.error_summary(e)}); pass --ami") from e
    notes.append(f"AMI from SSM {parameter}")
    from trainctl.catalog.images import support_today

    notes.append(support_today(parameter))
    return ami


def az_order(ec2, region: str, instance_type: str, count: int, market: str, first: str | None,
             azs_with_subnets: list[str], notes: list[str], types: tuple[str, ...] = ()) -> list[str]:
    """The plan's AZ first, then the other AZs with subnets that offer the type (a flexible layout: any of its
    types), best placement score first."""
    offered = {o["Location"] for o in ec2.describe_instance_type_offerings(
        LocationType="availability-zone",
        Filters=[{"Name": "instance-type", "Values": list(types) or [instance_type]}])["InstanceTypeOfferings"]}
    azs = [az for az in azs_with_subnets if az in offered]
    scores: dict[str, int] = {}
    if market == "spot" and len(azs) > 1 and (len(types) < 2 or len(types) >= zones.MIN_TYPES_PER_SCORE_REQUEST):
        try:
            # exactly the fleet's configuration (its one type, or a flexible layout's set), from the plan's cache
            # when the plan asked it
            from trainctl.aws.market import placement_scores_for

            scores, _ = placement_scores_for(ec2, region, instance_type, count, types if len(types) > 1 else None)
        except Exception as e:  # noqa: BLE001 - without scores the AZs keep their name order
            notes.append(f"no Spot placement scores ({aws.error_summary(e)}); AZs in name order")
    azs.sort(key=lambda az: (az != first, -scores.get(az, 0), az))
    if first and first not in azs:
        notes.append(f"the plan's AZ {first} has no usable subnet or does not offer {instance_type}")
    if scores:
        notes.append("AZ order: " + ", ".join(f"{az} (score {scores.get(az, '-')})" for az in azs))
    return azs


def node_subnets(ec2, region: str, inst, net, notes: list[str], secrets=()):
    """Only the subnets whose nodes reach S3, EC2 and CloudWatch Logs: a NAT route or the endpoints, or, for a
    type with one network card, a subnet that assigns a public IPv4 with a route to an internet gateway. None:
    the launch is refused, since such nodes would bill until their agent's time-out."""
    services = network.AGENT_INTERFACE_SERVICES + network.secret_services(secrets)  # the agent reads them
    public = not no_public_ipv4(inst)
    kept, why = network.reachable_network(ec2, region, net, services, public_ipv4=public)
    if not kept.by_az:
        if public:
            raise UsageError(f"no subnet lets {inst.name} nodes reach AWS (a public IPv4 with an internet gateway "
                             f"route, a NAT, or VPC endpoints): {why}")
        raise UsageError(f"{inst.name} has {inst.efa_interfaces} network cards and gets no public IPv4, so its "
                         f"nodes reach AWS only through a NAT or VPC endpoints: {why}")
    used = ", ".join(s for ids in kept.by_az.values() for s in ids)
    if not public:  # (one card: the subnets used are named below)
        notes.append(f"{inst.name}: no public IPv4 ({inst.efa_interfaces} network cards); subnets with a NAT route "
                     f"or the endpoints of {', '.join(('s3',) + services)} only: {used}")
    return kept


# ----------------------------------------------------------------------------- prepare
def prepare(client_for, option, spec: Any, settings: LaunchSettings) -> LaunchRequest:
    from trainctl.backends.bucket_calls import code_calls, job_bucket_calls
    from trainctl.catalog import load_catalog
    from trainctl.backends.packaging import job_code

    job, region, opts = settings.job_id, option.region, settings.options
    inst = common_shape(load_catalog(), option)
    ec2, notes = client_for("ec2", region), [layout_note(spec, option)]
    if getattr(spec, "distribution", "torch_distributed") != "torch_distributed":
        notes.append(f"distribution {spec.distribution} is SageMaker's: on EC2 the job runs torchrun with NCCL")
    account = client_for("sts", region).get_caller_identity()["Account"]
    bucket, calls = job_bucket_calls(client_for("s3", region), job, region, account, opts.bucket, notes)
    calls[:0] = spot_role.calls_if_missing(client_for("iam", region), region, option.market, notes)  # first
    ami = opts.ami or dlami(client_for, region, inst.accelerator.kind, notes)
    net = network.job_network(ec2, region, opts.subnet)
    secrets = dict(getattr(spec, "secrets", None) or {})
    net = node_subnets(ec2, region, inst, net, notes, tuple(secrets.values()))
    pkg, script = job_code(spec, settings.spec_path)
    net = pip_reach.subnets_for_pip(ec2, region, inst.name, net, not no_public_ipv4(inst), pkg, notes)
    azs = job_data.fsx_zones(client_for, region, spec.data, notes, az_order(  # an FSx channel: its AZ only
        ec2, region, option.instance_type, option.count, option.market, option.availability_zone, list(net.by_az), notes, option.instance_types))
    if not azs:
        raise CapacityError(f"no subnet in {region} is in an AZ that offers {option.instance_type}")
    refuse_bad_data(client_for, region, spec, opts, net.by_az[azs[0]], notes, PLATFORM)
    code_key, upload = code_calls(client_for("s3", region), bucket, account, pkg, job, region,
                                  why=f"the job's code ({len(pkg.files)} files, runs {script}) for the nodes")
    agent, agent_upload = agent_calls(client_for("s3", region), bucket, account, job, region)
    config = {"job_id": job, "region": region, "bucket": bucket, "bucket_owner": account, "code_key": code_key, **agent,
              "code_sha256": pkg.sha256, "secrets": secrets, "script": script,
              "args": as_command_line(entrypoint_args(spec, option, inst)), "nnodes": option.count, "nproc_per_node": nproc_per_node(inst),
              "instance_type": option.instance_type, "accelerator_count": inst.accelerator_count,  # the agent's device check
              "accelerator": inst.accelerator.kind, "efa": inst.efa, "efa_rdma": efa_rdma_read(inst), "master_port": MASTER_PORT,
              "shutdown_when_done": True, **stopping_condition(option, opts.max_runtime_hours),
              # the agent's outcome rules (bootstrap/outcome.py): reruns of a failed script, the plan's steps
              "max_retries": int(getattr(spec.entrypoint, "max_retries", 0) or 0), "total_steps": total_steps(spec, option),
              "elastic_min_nodes": spec.elastic.min_nodes if spec.elastic else None,  # membership.py: trains on fewer
              # recovery relaunches any of these, within the same cap per node (backends/ec2/fleet.py)
              "instance_types": list(option.instance_types),
              "max_node_usd": option.hourly_cap_usd / option.count if option.hourly_cap_usd else None,
              **budget.node_config(spec, option, opts.notify),  # the node agent enforces the budget, sends news
              # the survivors replace a reclaimed node (no laptop); a Capacity Block's end: checkpoint and stop first
              **recovery_config(spec, option, job), **block_node_config(option),
              **job_data.node_channels(spec.data, client_for, region, net.by_az[azs[0]], opts.security_group,
                                      option, notes)}
    calls += upload + agent_upload
    reads = job_data.data_reads(spec.data)  # the boundary must admit them (launch_limits.boundary)
    calls += _iam_calls(job, bucket, region, account, code_key, agent["agent_key"], tuple(secrets.values()),
                        boundary(client_for("iam", region), account, region, notes, reads=reads),
                        config.get("notify_topic"), reads, spec.name, data_keys(client_for, region, account, reads, notes))
    calls += log_group_calls(job, region, opts.log_retention_days, notes)
    group = _security_group_calls(ec2, job, net.vpc_id, region, opts, calls, notes)
    calls += job_data.lustre_ingress(config.get("channels", {}), group, job, region, opts.security_group)
    calls += placement_group_calls(job, azs, region)
    _template_call(ec2, job, inst, ami, group, config, option, region, calls, notes)
    _fleet_calls(ec2, job, option, azs, net, region, calls, notes)
    notes += [*job_data.channel_notes(config.get("channels", {})), f"AMI {ami}",
              f"code s3://{bucket}/{code_key} (sha256 {pkg.sha256[:12]})", *filter(None, [pkg.secrets_note()]),
              f"subnets in {azs[0]}: {', '.join(net.by_az[azs[0]])}", f"logs: CloudWatch Logs {log_group(job)}"]
    return LaunchRequest(platform=PLATFORM, job_id=job, region=region, option=option, calls=tuple(calls),
                         notes=tuple(notes), alternatives=(FLEET_GROUP,))


def _iam_calls(job: str, bucket: str, region: str, account: str, code_key: str, agent_key: str, secrets: tuple[str, ...],
               boundary_arn: str, topic: str | None = None, data: tuple[tuple[str, str], ...] = (),
               spec_name: str = "", keys: tuple[str, ...] = ()) -> list[AwsCall]:
    name, job_tags = name_for(job), tags(job)
    role_tags = tags(job, **{SPEC_TAG: spec_name})  # the boundary lets it read trainctl/<spec>/ secrets only
    policy = node_policy(job, bucket, region, account, code_key, secrets, topic, data, agent_key, keys)
    return [
        AwsCall("iam", "CreateRole", {"RoleName": name, "Path": naming.IAM_PATH,
                                      "AssumeRolePolicyDocument": json.dumps(EC2_TRUST),
                                      "PermissionsBoundary": boundary_arn,
                                      "Description": f"trainctl job {job} nodes", "Tags": role_tags},
                region, ok_errors=("EntityAlreadyExists",), why="the nodes' role, within trainctl's boundary"),
        AwsCall("iam", "PutRolePolicy", {"RoleName": name, "PolicyName": "trainctl-node",
                                         "PolicyDocument": json.dumps(policy)},
                region, why="its code, its job's S3 folders, its log group, describing peers, its secrets"),
        AwsCall("iam", "CreateInstanceProfile", {"InstanceProfileName": name, "Path": naming.IAM_PATH,
                                                 "Tags": job_tags},
                region, ok_errors=("EntityAlreadyExists",), why="carries the role to the instances"),
        AwsCall("iam", "AddRoleToInstanceProfile", {"InstanceProfileName": name, "RoleName": name}, region,
                ok_errors=("LimitExceeded", "EntityAlreadyExists"), why="the profile holds one role"),
    ]


def _security_group_calls(ec2, job: str, vpc: str, region: str, opts, calls: list[AwsCall],
                          notes: list[str]) -> str:
    """Adds the group's calls; returns the group id or placeholder the launch template uses."""
    if opts.security_group:
        # The user's group: used as it is (it must already let the nodes talk to each other) and, being
        # untagged for the job, never deleted by cleanup.
        notes.append(f"security group {opts.security_group} given: no rules added; it must allow all traffic "
                     "in from and out to itself")
        return opts.security_group
    existing = security_group(ec2, job, vpc)
    if existing:
        notes.append(f"security group {existing} exists for the job; reusing it")
    calls.extend(self_only_security_group(job, name_for(job), vpc, region, tags(job), existing_group=existing))
    group = existing or "${security_group_id}"
    if opts.ssh_cidr:
        cidr = ssh_cidr(opts.ssh_cidr)
        calls.append(AwsCall("ec2", "AuthorizeSecurityGroupIngress", {
            "GroupId": group, "IpPermissions": [{"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
                                                 "IpRanges": [{"CidrIp": cidr, "Description": "SSH, asked for"}]}],
            "TagSpecifications": [{"ResourceType": "security-group-rule", "Tags": tags(job)}]},
            region, ok_errors=("InvalidPermission.Duplicate",), why=f"SSH from {cidr} only"))
    return group


def _template_call(ec2, job: str, inst, ami: str, group: str, config: dict, option, region: str,
                   calls: list[AwsCall], notes: list[str]) -> None:
    from trainctl.bootstrap import render_user_data

    existing = launch_template(ec2, job)
    if existing:
        notes.append(f"launch template {existing} exists for the job; reusing it")
        return
    data = template_data(inst, ami, name_for(job), group, render_user_data(config), tags(job),
                         image_facts.root_device(ec2, ami, notes), getattr(option, "volume_gb", None))
    calls.append(AwsCall("ec2", "CreateLaunchTemplate", {
        "LaunchTemplateName": name_for(job), "VersionDescription": f"trainctl job {job}",
        "ClientToken": token(job, "lt", data), "LaunchTemplateData": data,
        "TagSpecifications": [{"ResourceType": "launch-template",
                               "Tags": tags(job, **{NODES_TAG: str(option.count), MARKET_TAG: option.market})}]},
        region, ok_errors=("InvalidLaunchTemplateName.AlreadyExistsException",), why="what every node boots with"))


def _fleet_calls(ec2, job: str, option, azs: list[str], net, region: str, calls: list[AwsCall],
                 notes: list[str]) -> None:
    running = instances(ec2, job, LIVE_STATES)
    if len(running) >= option.count:
        notes.append(f"{len(running)} instances of the job are already running: nothing to launch")
        return
    nonce = f"{time.time_ns()}"  # a new launch is a new fleet; the same request re-submitted is not
    missing = option.count - len(running)
    cap = option.hourly_cap_usd * missing / option.count if option.hourly_cap_usd else None
    for i, az in enumerate(azs[:MAX_AZ_ATTEMPTS]):
        calls.append(fleet_call(job, option.instance_type, missing, option.market, az, list(net.by_az[az]),
                                token(job, f"fleet-{az}", nonce), region, option.instance_types, cap,
                                group_for(job, az, i == 0)))
    if len(azs) > 1:
        notes.append("the fleets are alternatives: the next AZ's only when the one before got fewer than "
                     f"{option.count} instance{'s' if option.count != 1 else ''}, which are terminated first (all or "
                     "nothing)")
