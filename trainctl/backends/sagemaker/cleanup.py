"""`trainctl down` of a SageMaker job: stop it if it runs, then its security groups and, once it has ended,
its own execution role."""
from __future__ import annotations

import time

from trainctl.aws import clients as aws
from trainctl.backends.sagemaker import role as job_role
from trainctl.backends.sagemaker.status import NOT_FOUND
from trainctl.errors import TrainctlError
from trainctl.naming.tags import JOB_TAG

ENDED = ("Completed", "Failed", "Stopped")
ENDED_POLLS = 70  # about ten minutes: SageMaker gives a stopped job 120 s, then its uploads take their time


def _wait_ended(sm, job_id: str) -> None:
    """Until the job is Completed, Failed or Stopped (a stop takes as long as its last checkpoint upload)."""
    for attempt in range(ENDED_POLLS):
        if sm.describe_training_job(TrainingJobName=job_id)["TrainingJobStatus"] in ENDED:
            return
        time.sleep(min(10.0, 0.5 * 2 ** attempt))
    raise TrainctlError(f"{job_id} is still stopping after {ENDED_POLLS} checks: its execution role stays until it "
                        f"has ended; run `trainctl down {job_id}` again then")


def _refuse_ec2_job(client_for, job_id: str, region: str) -> None:
    """A job whose EC2 nodes live is an EC2 job, whatever a record said: SageMaker's `down` would delete its node
    role's policy and fail on the rest, leaving the nodes running. Refused before anything is touched (a
    principal that may not describe instances has no EC2 jobs to protect)."""
    filters = [{"Name": f"tag:{JOB_TAG}", "Values": [job_id]},
               {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}]
    try:
        pages = client_for("ec2", region).get_paginator("describe_instances").paginate(Filters=filters)
        live = [i["InstanceId"] for page in pages for r in page["Reservations"] for i in r["Instances"]]
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) in ("UnauthorizedOperation", "AccessDenied", "AccessDeniedException"):
            return
        raise
    if live:
        raise TrainctlError(f"{job_id} runs on EC2 ({', '.join(live[:4])} tagged {JOB_TAG}={job_id}), not on "
                            f"SageMaker: nothing removed; `trainctl down {job_id} --platform ec2` takes it down")


def cleanup(client_for, job_id: str, region: str) -> list[str]:
    """Stop the job if it still runs, then delete the security groups tagged with it and, once the job has
    ended, its own execution role (the bucket is shared and code objects are shared by hash; checkpoints,
    model and logs are the job's output and stay)."""
    removed = []
    _refuse_ec2_job(client_for, job_id, region)
    sm = client_for("sagemaker", region)
    try:
        found = sm.describe_training_job(TrainingJobName=job_id)
    except Exception as e:  # noqa: BLE001
        if aws.error_code(e) not in NOT_FOUND:
            raise
        found = {}  # never created (a launch that failed or was interrupted before CreateTrainingJob)
    # A job of this name that lacks the tag is someone else's (the launch refused to adopt it): left alone.
    ours = bool(found) and any(t["Key"] == JOB_TAG and t["Value"] == job_id for t in
                               sm.list_tags(ResourceArn=found["TrainingJobArn"])["Tags"])
    if ours and found.get("TrainingJobStatus") == "InProgress":
        sm.stop_training_job(TrainingJobName=job_id)
        removed.append(f"training job {job_id} (it had reached SageMaker; stopping: it checkpoints, "
                       "uploads its model, then ends)")
    if ours and found.get("TrainingJobStatus") in ("InProgress", "Stopping"):
        # the container uploads its checkpoints and model with the execution role: it goes last
        _wait_ended(sm, job_id)
    ec2 = client_for("ec2", region)
    for g in ec2.describe_security_groups(Filters=[{"Name": f"tag:{JOB_TAG}", "Values": [job_id]}])[
            "SecurityGroups"]:
        try:
            ec2.delete_security_group(GroupId=g["GroupId"])
            removed.append(f"security group {g['GroupId']}")
        except Exception as e:  # noqa: BLE001
            if aws.error_code(e) == "DependencyViolation":  # the job's hosts still hold network interfaces
                raise TrainctlError(f"security group {g['GroupId']} of {job_id} is still in use by the job's "
                                    f"hosts: run `trainctl down {job_id}` again once the job has ended") from None
            if aws.error_code(e) != "InvalidGroup.NotFound":
                raise
    plan = (found.get("ResourceConfig") or {}).get("TrainingPlanArn") if ours else None
    kept = [f"training plan {plan.rsplit('/', 1)[-1]} kept: a SageMaker training plan cannot be cancelled (its fee was "
            "paid when bought); it stays the account's until its end"] if plan else []
    return removed + job_role.delete_role(client_for("iam", region), job_id) + kept
