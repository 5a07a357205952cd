"""An EC2 job of trainctl's own backend in the sandbox, for the tests that launch one and then watch, stop,
recover or take it down: the spec, a plan option as `trainctl plan` makes it, launch settings, and what is left
or still running of a job afterwards. The `launched` fixture (tests/conftest.py) launches one with these."""
from __future__ import annotations

import time

from trainctl.backends.base import JOB_TAG, LaunchSettings
from trainctl.backends.options import Ec2Options
from trainctl.plans import Option

JOB, REGION = "job-1", "us-east-1"

SPEC = """\
name: ec2-test
entrypoint: {bundled: ddp, args: {model: vit_micro, batch-size: 8, steps: 20, device: cpu, bf16: false}}
model: {architecture: vit_micro}
workload: {samples: 1000, batch_size_per_accelerator: 8}
"""


def option(instance_type="p4d.24xlarge", count=2, market="spot", az="us-east-1a", platform="ec2"):
    """A plan option as `trainctl plan` makes it (the figures do not matter to the backend)."""
    return Option(rank=1, platform=platform, instance_type=instance_type, count=count, market=market,
                  region="us-east-1", availability_zone=az, accelerators=count, hourly_usd=1.0,
                  throughput_samples_per_s=100.0, throughput_source="model", hours=1.0, expected_cost_usd=1.0)


def settings(spec_path, job="job-1", **kw):
    return LaunchSettings(job_id=job, spec_path=spec_path, options=Ec2Options(**kw))


def leftovers(sb, job="job-1") -> list[str]:
    """Everything still tagged for the job (terminated instances do not count), read with the sandbox's own client."""
    ec2, iam = sb.client("ec2"), sb.client("iam")
    flt = [{"Name": f"tag:{JOB_TAG}", "Values": [job]}]
    out = [i["InstanceId"] for r in ec2.describe_instances(Filters=flt + [
        {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}])["Reservations"]
        for i in r["Instances"]]
    out += [g["GroupId"] for g in ec2.describe_security_groups(Filters=flt)["SecurityGroups"]]
    out += [t["LaunchTemplateId"] for t in ec2.describe_launch_templates(Filters=flt)["LaunchTemplates"]]
    out += [g["GroupName"] for g in ec2.describe_placement_groups(Filters=flt)["PlacementGroups"]]
    out += [r["RoleName"] for r in iam.list_roles(PathPrefix="/trainctl/")["Roles"]]
    out += [p["InstanceProfileName"] for p in iam.list_instance_profiles(PathPrefix="/trainctl/")["InstanceProfiles"]]
    return out


def live(sb, job="job-1") -> list[dict]:
    ec2 = sb.client("ec2")
    return [i for r in ec2.describe_instances(Filters=[
        {"Name": f"tag:{JOB_TAG}", "Values": [job]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]}])["Reservations"] for i in r["Instances"]]


def stop_mark(sb, job: str = JOB) -> bool:
    """Whether the job's stop mark is in its bucket (what `stop` and `down` write first)."""
    s3 = sb.client("s3")
    return s3.list_objects_v2(Bucket=job_bucket(sb), Prefix=f"{job}/status/stopped").get("KeyCount", 0) > 0


def job_bucket(sb) -> str:
    return next(b["Name"] for b in sb.client("s3").list_buckets()["Buckets"] if b["Name"].startswith("trainctl-"))


def set_capacity(sb, available: bool, instance_type: str = "g5.12xlarge") -> None:
    """Capacity of the launched job's type in every AZ of the region, on or off."""
    for zone in sb.client("ec2").describe_availability_zones()["AvailabilityZones"]:
        sb.admin.set_capacity(instance_type, zone["ZoneName"], available)


def end_earlier_nodes(sb) -> None:
    states = [{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    for region in ("us-east-1", "us-west-2"):
        ec2 = sb.client("ec2", region)
        ids = [i["InstanceId"] for r in ec2.describe_instances(Filters=states)["Reservations"] for i in r["Instances"]]
        if ids:
            ec2.terminate_instances(InstanceIds=ids)


# The longest any one awaited event of a real sandbox job may take on a loaded 2-core machine (a bound, not a
# measurement).
EVENT_WAIT_S = 600


def until(what: str, check, bound_s: float = EVENT_WAIT_S):
    """Wait for an event the job itself produces (polling AWS as a user would); fail naming it if it never comes."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(1.0)
    raise AssertionError(f"never happened: {what}")
