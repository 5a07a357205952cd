"""Ctrl-C at each step of a launch leaves nothing, or only resources tagged with the job that `trainctl down`
removes.

For each step the sandbox adds latency to that step's operation; the test starts `trainctl launch --yes`
in a subprocess, waits until the sandbox's call log shows the call arriving (so the CLI is blocked on it),
sends SIGINT, waits until the sandbox has finished answering (it completes the call the client gave up
on, as AWS would), runs `trainctl down JOB` and checks what is left. Waits are for events, never timed.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.helpers import CONFIGS, ROOT, clean_env, run_cli
from tests.support.interrupts import (LATENCY_MS, SPEC, check_interrupted, count, interrupt_launch_at, job_of,
                                      unwrapped)

# Ctrl-C while each of these calls is out. `make test` takes one step per kind of cleanup (nothing created yet, the
# bucket and its object, a security group half authorized, a role without its policy or profile, the submit
# itself); TRAINCTL_TEST_EVERY_STEP=1 takes every step of the launch (about ten minutes more on 2 cores).
EVERY_STEP = os.environ.get("TRAINCTL_TEST_EVERY_STEP") == "1"
SAGEMAKER_STEPS = (["GetProducts", "PutBucketEncryption", "PutPublicAccessBlock", "PutObject", "CreateSecurityGroup",
                    "AuthorizeSecurityGroupIngress", "AuthorizeSecurityGroupEgress", "CreateRole", "PutRolePolicy",
                    "CreateTrainingJob"] if EVERY_STEP else
                   ["GetProducts", "PutObject", "AuthorizeSecurityGroupIngress", "PutRolePolicy", "CreateTrainingJob"])
EC2_STEPS = (["PutObject", "CreateRole", "PutRolePolicy", "CreateInstanceProfile", "AddRoleToInstanceProfile",
              "CreateSecurityGroup", "AuthorizeSecurityGroupIngress", "CreatePlacementGroup", "CreateLaunchTemplate",
              "CreateFleet"] if EVERY_STEP else
             ["PutRolePolicy", "AddRoleToInstanceProfile", "AuthorizeSecurityGroupIngress", "CreateLaunchTemplate",
              "CreateFleet"])


def tagged_security_groups(sandbox, region: str, job: str | None) -> list:
    filters = ([{"Name": "tag:trainctl:job", "Values": [job]}] if job else [{"Name": "tag-key", "Values": ["trainctl:job"]}])
    return sandbox.client("ec2", region).describe_security_groups(Filters=filters)["SecurityGroups"]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("operation", SAGEMAKER_STEPS)
def test_sagemaker_launch_interrupted(sm, tmp_path, operation):
    home = tmp_path / "home"
    # the group's steps need two nodes: such a job runs in the VPC with its own group (one node uses no VPC)
    nodes = 2 if "SecurityGroup" in operation else 1
    proc = interrupt_launch_at(sm, home, [SPEC, "--layout", f"g5.xlarge:{nodes}:on-demand"], operation)
    check_interrupted(proc)
    job = job_of(proc.stderr)
    sagemaker = sm.client("sagemaker")
    if operation == "GetProducts":  # still planning: nothing was created
        assert job is None, proc.stderr
        assert tagged_security_groups(sm, "us-east-1", None) == []
        assert sagemaker.list_training_jobs()["TrainingJobSummaries"] == []
        return
    assert job and f"trainctl down {job}" in unwrapped(proc.stderr)
    jobs = json.loads(run_cli(["-o", "json", "ls", "--no-status"], home, env=sm.env).stdout)["jobs"]
    # once CreateTrainingJob went out the job may run: its record waits for AWS's word
    recorded = "Unknown" if operation == "CreateTrainingJob" else "Interrupted"
    assert [(j["job_id"], j["recorded_status"]) for j in jobs] == [(job, recorded)]
    down = run_cli(["-o", "json", "down", job], home, env=sm.env)
    assert down.returncode == 0, down.stderr
    assert tagged_security_groups(sm, "us-east-1", job) == []
    for summary in sagemaker.list_training_jobs()["TrainingJobSummaries"]:
        # the request reached SageMaker before the client gave up: the job exists, tagged with its id
        arn = sagemaker.describe_training_job(TrainingJobName=summary["TrainingJobName"])["TrainingJobArn"]
        assert {"Key": "trainctl:job", "Value": job} in sagemaker.list_tags(ResourceArn=arn)["Tags"]
        assert summary["TrainingJobName"] == job and operation == "CreateTrainingJob"
        # down stopped it: nothing of the job keeps running (and billing)
        status = sagemaker.describe_training_job(TrainingJobName=job)["TrainingJobStatus"]
        # down waited for it to end before deleting its execution role (the stopping job still uploads)
        assert status == "Stopped", status
    assert sm.client("iam").list_roles(PathPrefix="/trainctl/")["Roles"] == []  # the job's own role went too
    s3 = sm.client("s3")
    for obj in s3.list_objects_v2(Bucket="trainctl-123456789012-us-east-1", Prefix="trainctl/code/").get(
            "Contents", []):
        # the content-addressed code object (shared by every job with the same code) carries the job tag
        tags = s3.get_object_tagging(Bucket="trainctl-123456789012-us-east-1", Key=obj["Key"])["TagSet"]
        assert {"Key": "trainctl:job", "Value": job} in tags, obj["Key"]


@pytest.mark.timeout(240)
def test_a_job_interrupted_after_its_submit_went_out_is_listed_as_aws_sees_it_and_blocks_a_duplicate(sm, tmp_path):
    home = tmp_path / "home"
    before = sm.admin.action("configure_training_jobs")["starting_s"]
    sm.admin.action("configure_training_jobs", starting_s=3600)  # it stays InProgress (Starting) for the test
    try:
        layout = ["--layout", "g5.xlarge:1:on-demand"]
        proc = interrupt_launch_at(sm, home, [SPEC, *layout], "CreateTrainingJob")
        check_interrupted(proc)
        job = job_of(proc.stderr)
        assert job and "interrupted after CreateTrainingJob was sent" in proc.stderr, proc.stderr
        jobs = json.loads(run_cli(["-o", "json", "ls"], home, env=sm.env).stdout)["jobs"]
        assert [(j["job_id"], j["status"]) for j in jobs] == [(job, "InProgress")]
        again = run_cli(["launch", SPEC, *layout, "--yes"], home, env=sm.env)
        assert again.returncode == 1 and f"{job} (InProgress" in again.stderr, again.stderr
        assert len(sm.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]) == 1
    finally:
        sm.admin.action("configure_training_jobs", starting_s=before)
    assert run_cli(["down", job], home, env=sm.env).returncode == 0


EC2_ARGS = [str(CONFIGS / "vit-base-g5.yaml"), "--platform", "ec2", "--layout", "g5.xlarge:2:spot"]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("operation", EC2_STEPS)
def test_ec2_launch_interrupted(sandbox, tmp_path, operation):
    home = tmp_path / "home"
    proc = interrupt_launch_at(sandbox, home, EC2_ARGS, operation)
    check_interrupted(proc)
    job = job_of(proc.stderr)
    assert job, proc.stderr
    down = run_cli(["-o", "json", "down", job], home, env=sandbox.env)
    assert down.returncode == 0, down.stderr
    tag = [{"Name": "tag:trainctl:job", "Values": [job]}]
    for region in ("us-east-1", "us-west-2"):
        ec2 = sandbox.client("ec2", region)
        assert ec2.describe_security_groups(Filters=tag)["SecurityGroups"] == []
        assert ec2.describe_launch_templates(Filters=tag)["LaunchTemplates"] == []
        assert ec2.describe_placement_groups(Filters=tag)["PlacementGroups"] == []
        live = [i for r in ec2.describe_instances(Filters=tag)["Reservations"] for i in r["Instances"]
                if i["State"]["Name"] not in ("terminated", "shutting-down")]
        assert live == []
    iam = sandbox.client("iam")
    assert iam.list_roles(PathPrefix="/trainctl/")["Roles"] == []
    assert iam.list_instance_profiles(PathPrefix="/trainctl/")["InstanceProfiles"] == []


def _live_instances(sandbox, job: str) -> list[str]:
    tag = [{"Name": "tag:trainctl:job", "Values": [job]}]
    return [i["InstanceId"] for region in ("us-east-1", "us-west-2")
            for r in sandbox.client("ec2", region).describe_instances(Filters=tag)["Reservations"]
            for i in r["Instances"] if i["State"]["Name"] not in ("terminated", "shutting-down")]


@pytest.mark.timeout(240)
def test_ctrl_c_while_create_fleet_is_in_flight_finds_its_instances_and_keeps_the_interrupts_exit_code(sandbox, tmp_path):
    proc = interrupt_launch_at(sandbox, tmp_path / "home", EC2_ARGS, "CreateFleet")
    check_interrupted(proc)
    job = job_of(proc.stderr)
    # the fleet the sandbox made after the client gave up was found by tag and removed, with progress said
    assert "CreateFleet was sent without an answer: looking for what it makes" in proc.stderr
    assert re.search(r"^  removed instance i-", proc.stderr, re.M) and "terminating i-" in proc.stderr, proc.stderr
    assert _live_instances(sandbox, job) == []
    # and then it says so, not that the job "may be running" (issue 35)
    said = unwrapped(proc.stderr)
    assert "may be running" not in said and f"the cleanup removed everything {job} had" in said, proc.stderr
    jobs = json.loads(run_cli(["-o", "json", "ls", "--no-status"], tmp_path / "home", env=sandbox.env).stdout)["jobs"]
    assert [(j["job_id"], j["recorded_status"]) for j in jobs] == [(job, "Interrupted")]


@pytest.mark.timeout(240)
def test_a_second_ctrl_c_during_the_cleanup_says_exactly_what_is_left(sandbox, tmp_path):
    before = count(sandbox, "DeleteLaunchTemplate")
    sandbox.admin.set_latency("DeleteLaunchTemplate", LATENCY_MS)  # the cleanup is held there
    sandbox.admin.set_latency("CreateFleet", LATENCY_MS)  # the first Ctrl-C lands while it is out
    try:
        proc = subprocess.Popen([sys.executable, "-m", "trainctl.cli", "launch", *EC2_ARGS, "--yes"], cwd=ROOT,
                                env=clean_env(tmp_path / "home", sandbox.env), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            fleets = count(sandbox, "CreateFleet")
            while count(sandbox, "CreateFleet") == fleets:  # the job's instances are on their way
                assert proc.poll() is None, "\n".join(proc.communicate())
                time.sleep(0.02)
            proc.send_signal(signal.SIGINT)
            while count(sandbox, "DeleteLaunchTemplate") == before:  # the instances are gone, the rest is not
                assert proc.poll() is None, "\n".join(proc.communicate())
                time.sleep(0.02)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
    finally:
        sandbox.admin.set_latency("DeleteLaunchTemplate", 0)
        sandbox.admin.set_latency("CreateFleet", 0)
    check_interrupted(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    job = job_of(err)
    lines = err.splitlines()
    (at,) = [i for i, ln in enumerate(lines) if "cleanup stopped:" in ln]
    # the line wraps at the terminal's width (80 without one); its continuation lines are indented deeper
    end = next((i for i in range(at + 1, len(lines)) if not lines[i].startswith("    ")), len(lines))
    line = " ".join(ln.strip() for ln in lines[at:end])
    assert "no instance of the job runs" in line and "security group sg-" in line and f"trainctl down {job}" in line
    assert _live_instances(sandbox, job) == []
    assert run_cli(["down", job], tmp_path / "home", env=sandbox.env).returncode == 0
