"""`trainctl down` of an EC2 job: delete everything tagged for it, in dependency order; safe to repeat.
The job's S3 code, checkpoints and logs stay: they are its output."""
from __future__ import annotations

import time
from typing import Any, Callable

from trainctl.aws import clients as aws
from trainctl.naming.resources import IAM_PATH
from trainctl.backends.base import JOB_TAG
from trainctl.backends.ec2.capacity_block_launch import kept_blocks
from trainctl.backends.ec2.common import instances, job_filter, launch_template, name_for, tag_map
from trainctl.backends.ec2.fleet import terminate
from trainctl.backends.ec2.status import mark_stopped
from trainctl.errors import TrainctlError

SAGEMAKER_JOB_POLICY = "trainctl-sagemaker-job"  # a SageMaker execution role's policy (backends/sagemaker/role.py)


def retry_in_use(fn: Callable[[], Any], codes: tuple[str, ...], attempts: int = 30) -> None:
    for attempt in range(attempts):
        try:
            fn()
            return
        except Exception as e:  # noqa: BLE001
            if aws.error_code(e) not in codes or attempt == attempts - 1:
                raise
            time.sleep(min(10.0, 0.5 * 2 ** attempt))


TERMINATE_WAIT_S = 600.0


def await_terminated(ec2, ids: list[str], wait_s: float = TERMINATE_WAIT_S) -> None:
    """Until every instance of `ids` is terminated (or no longer described). Not botocore's `instance_terminated`
    waiter: it fails at once on a `pending` state, which EC2's eventually consistent DescribeInstances may still
    answer right after TerminateInstances (docs/aws-rules.md, "Eventual consistency"); here that is "not yet"."""
    deadline, delay = time.monotonic() + wait_s, 1.0
    while True:
        try:
            found = [i for r in ec2.describe_instances(InstanceIds=ids)["Reservations"] for i in r["Instances"]]
            left = [f"{i['InstanceId']} ({i['State']['Name']})" for i in found if i["State"]["Name"] != "terminated"]
        except Exception as e:  # noqa: BLE001
            if aws.error_code(e) != "InvalidInstanceID.NotFound":
                raise
            left = [f"{i} (not described yet)" for i in ids]  # eventual consistency again: ask once more
        if not left:
            return
        if time.monotonic() >= deadline:
            raise TrainctlError(f"instances not terminated after {wait_s:.0f} s: {', '.join(left)}; "
                                f"`trainctl down` again waits for them")
        time.sleep(delay)
        delay = min(delay * 2, 10.0)


def cleanup(client_for, job_id: str, region: str, say: Callable[[str], None] | None = None) -> list[str]:
    """Delete everything tagged for the job, in dependency order; returns what went. `say` hears each slow
    step as it starts (a launch's cleanup after Ctrl-C shows its progress).

    The stop mark comes first: a `watch --recover` running beside `down` would otherwise see the nodes
    going and launch replacements (it checks the mark before and after each fleet it makes)."""
    say = say or (lambda message: None)
    _refuse_sagemaker_job(client_for, job_id, region)
    ec2 = client_for("ec2", region)
    removed: list[str] = []
    waited: Exception | None = None
    live = [i["InstanceId"] for i in instances(ec2, job_id, ("pending", "running", "stopping", "stopped"))]
    if live or launch_template(ec2, job_id):
        mark_stopped(client_for, job_id, region)
    if live:
        say(f"terminating {', '.join(live)} and waiting for them to end")
        terminate(ec2, live)
        removed += [f"instance {i}" for i in live]
        try:
            await_terminated(ec2, live)
        except Exception as e:  # noqa: BLE001 - the fleets and launch templates need no wait: remove them first
            waited = e
    for fleet in ec2.describe_fleets().get("Fleets", []):
        if tag_map(fleet).get(JOB_TAG) == job_id and not fleet.get("FleetState", "").startswith("deleted"):
            terminate(ec2, [], fleet["FleetId"])
            removed.append(f"fleet {fleet['FleetId']}")
    for lt in ec2.describe_launch_templates(Filters=job_filter(job_id))["LaunchTemplates"]:
        ec2.delete_launch_template(LaunchTemplateId=lt["LaunchTemplateId"])
        removed.append(f"launch template {lt['LaunchTemplateName']} ({lt['LaunchTemplateId']})")
    if waited is not None:  # the placement groups and the security group are in use until the instances end
        raise TrainctlError(f"removed {', '.join(removed)}; then waiting for the instances to end failed "
                            f"({aws.error_summary(waited)}); `trainctl down {job_id}` again removes the rest")
    for pg in ec2.describe_placement_groups(Filters=job_filter(job_id))["PlacementGroups"]:
        say(f"deleting placement group {pg['GroupName']}")
        retry_in_use(lambda: ec2.delete_placement_group(GroupName=pg["GroupName"]), ("InvalidPlacementGroup.InUse",))
        removed.append(f"placement group {pg['GroupName']}")
    for sg in ec2.describe_security_groups(Filters=job_filter(job_id))["SecurityGroups"]:
        # Network interfaces of just-terminated instances release the group a little later on AWS.
        retry_in_use(lambda: ec2.delete_security_group(GroupId=sg["GroupId"]), ("DependencyViolation",))
        removed.append(f"security group {sg['GroupId']}")
    iam = client_for("iam", region)
    return removed + _instance_profiles(iam, job_id) + _roles(iam, job_id) + kept_blocks(ec2, job_id)


def _refuse_sagemaker_job(client_for, job_id: str, region: str) -> None:
    """A SageMaker training job of this id, tagged with it and still running, is a SageMaker job whatever a record
    said: EC2's `down` would delete its execution role under it. Refused before anything is touched (a principal
    that may not describe training jobs has none to protect)."""
    sm = client_for("sagemaker", region)
    try:
        found = sm.describe_training_job(TrainingJobName=job_id)
        if found.get("TrainingJobStatus") not in ("InProgress", "Stopping"):
            return
        tags = sm.list_tags(ResourceArn=found["TrainingJobArn"])["Tags"]
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) in ("ValidationException", "ResourceNotFound", "AccessDenied",
                                 "AccessDeniedException"):
            return
        raise
    if any(t["Key"] == JOB_TAG and t["Value"] == job_id for t in tags):
        raise TrainctlError(f"{job_id} runs on SageMaker (training job {found['TrainingJobArn']}), not on EC2: "
                            f"nothing removed; `trainctl down {job_id} --platform sagemaker` takes it down")


def _gone_is_done(fn: Callable[[], Any]) -> Any:
    """A delete whose target another `down` of the job removed meanwhile has nothing left to do."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) != "NoSuchEntity":
            raise
        return None


def _role_is_ours(iam, name: str, job_id: str) -> bool:
    found = _gone_is_done(lambda: iam.list_role_tags(RoleName=name))
    return found is not None and any(t["Key"] == JOB_TAG and t["Value"] == job_id for t in found["Tags"])


def _instance_profiles(iam, job_id: str) -> list[str]:
    removed = []
    for page in iam.get_paginator("list_instance_profiles").paginate(PathPrefix=IAM_PATH):
        for profile in page["InstanceProfiles"]:
            name = profile["InstanceProfileName"]
            roles = [r["RoleName"] for r in profile.get("Roles", [])]
            # Decided through the role's tags; a profile without a role is what a launch that failed right
            # after creating it leaves, and it carries the job's name.
            if not (any(_role_is_ours(iam, r, job_id) for r in roles) or (not roles and name == name_for(job_id))):
                continue
            for role in roles:
                _gone_is_done(lambda: iam.remove_role_from_instance_profile(InstanceProfileName=name, RoleName=role))
            _gone_is_done(lambda: iam.delete_instance_profile(InstanceProfileName=name))
            removed.append(f"instance profile {name}")
    return removed


def _roles(iam, job_id: str) -> list[str]:
    removed = []
    for page in iam.get_paginator("list_roles").paginate(PathPrefix=IAM_PATH):
        for role in page["Roles"]:
            name = role["RoleName"]
            if not _role_is_ours(iam, name, job_id):
                continue
            policies = (_gone_is_done(lambda: iam.list_role_policies(RoleName=name)) or {}).get("PolicyNames", [])
            if SAGEMAKER_JOB_POLICY in policies:  # the job's SageMaker execution role: not EC2's to delete
                continue
            for policy in policies:
                _gone_is_done(lambda: iam.delete_role_policy(RoleName=name, PolicyName=policy))
            attached = _gone_is_done(lambda: iam.list_attached_role_policies(RoleName=name)) or {}
            for policy in attached.get("AttachedPolicies", []):
                _gone_is_done(lambda: iam.detach_role_policy(RoleName=name, PolicyArn=policy["PolicyArn"]))
            profiles = _gone_is_done(lambda: iam.list_instance_profiles_for_role(RoleName=name)) or {}
            for profile in profiles.get("InstanceProfiles", []):
                _gone_is_done(lambda: iam.remove_role_from_instance_profile(
                    InstanceProfileName=profile["InstanceProfileName"], RoleName=name))
            _gone_is_done(lambda: iam.delete_role(RoleName=name))
            removed.append(f"role {name}")
    return removed
