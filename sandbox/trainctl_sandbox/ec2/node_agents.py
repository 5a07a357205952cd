"""What becomes of an EC2 instance's network after launch, where moto does not follow AWS, and the first act
of trainctl's node agent on it.

- An instance launched with several network interfaces gets no auto-assigned public IPv4 (EC2 User Guide,
  "using-instance-addressing": "You cannot auto-assign a public IP address if you specify more than one network
  interface"); moto gives one anyway, so it is taken away here.
- The node agent's first act is to reach CloudWatch Logs and create its stream (/trainctl/<job>, named by the
  instance id): its check-in. An instance runs its user data, and so the agent (nodes.py); where the sandbox
  keeps its instances idle (`configure_instances(run_user_data=False)`) it makes that check-in for an
  instance of a trainctl job when the instance could reach S3, EC2 and CloudWatch Logs (vpc_reach: a public
  IPv4 with an internet gateway route, a NAT, or the VPC endpoints). An instance that could not never checks
  in, as on AWS, and `trainctl watch` reports it.
"""
from __future__ import annotations

from typing import Any

from trainctl_sandbox.ec2 import nodes, vpc_reach
from trainctl_sandbox.server.context import SandboxContext

JOB_TAG = "trainctl:job"


def after_launch(ctx: SandboxContext, account: str, region: str, instances: list[Any], interfaces: list[dict]) -> None:
    """`interfaces`: the NetworkInterfaces the launch asked for (none: the instance's one default interface)."""
    for instance in instances:
        if len(interfaces) > 1:
            for nic in instance.nics.values():
                nic.public_ip, nic.public_ip_auto_assign = None, False
        elif not interfaces or interfaces[0].get("AssociatePublicIpAddress") is None:
            # One interface, or none, that does not say: the subnet's MapPublicIpOnLaunch decides (EC2 User
            # Guide, "using-instance-addressing"; a default subnet's is true); moto assigns none.
            nic = next(iter(instance.nics.values()), None)
            if nic is not None and str(nic.subnet.map_public_ip_on_launch).lower() == "true" and not nic.public_ip:
                nic.public_ip_auto_assign = True
                nic.check_auto_public_ip()
    running = set(nodes.start(ctx, account, region, instances))
    for instance in instances:
        if instance.id not in running and instance._state.name in ("pending", "running"):
            _check_in(account, region, instance)  # no agent runs on it (idle instances): the sandbox checks in


def _check_in(account: str, region: str, instance: Any) -> None:
    job = next((t["value"] for t in instance.get_tags() if t["key"] == JOB_TAG), None)
    if not job or not instance.subnet_id:
        return
    route = vpc_reach.reach(account, region, instance.subnet_id)
    public = bool(instance.public_ip)
    if not all(route.reaches(service, public) for service in vpc_reach.AGENT_SERVICES):
        return  # its agent cannot reach AWS: no check-in, ever
    from moto.logs.models import logs_backends

    logs = logs_backends[account][region]
    group = f"/trainctl/{job}"
    if group not in logs.groups:
        logs.create_log_group(group, {})
    if instance.id not in logs.groups[group].streams:
        logs.create_log_stream(group, instance.id)
