"""`trainctl sandbox interrupt JOB` on an EC2 job does what a Spot reclaim does: EC2 posts the
instance-action notice, then terminates the instance with StateReason Server.SpotInstanceTermination; trainctl
counts it as an interruption and `watch --recover` brings the node back. A SageMaker job is interrupted as
before (sandbox/tests)."""
from __future__ import annotations

import time

import pytest

from tests.support.helpers import run_cli
from trainctl_sandbox.admin import SandboxAdminError

JOB, REGION = "job-1", "us-east-1"


def _sandbox_cli(sb, *args: str):
    # The session's sandbox is found through TRAINCTL_HOME, as `trainctl sandbox ...` finds a running one.
    return run_cli(["sandbox", *args], sb.state_dir.parent, env=sb.env)


def _instance(sb, instance_id: str) -> dict:
    return sb.client("ec2").describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]


def test_interrupt_reclaims_one_spot_node_of_an_ec2_job_and_recover_replaces_it(launched):
    sb, backend, out = launched
    proc = _sandbox_cli(sb, "interrupt", JOB)
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    reclaimed = [i for i in out["instance_ids"] if i in line]
    assert line.startswith(f"Spot reclaim of 1 node of {JOB} (") and line.endswith(") now") and len(reclaimed) == 1
    gone = _instance(sb, reclaimed[0])
    assert gone["State"]["Name"] == "terminated"
    assert gone["StateReason"]["Code"] == "Server.SpotInstanceTermination"
    notice = sb.admin.action("spot_instance_action", instance_id=reclaimed[0])
    assert notice["action"] == "terminate" and notice["time"].endswith("Z")
    survivor = next(i for i in out["instance_ids"] if i not in reclaimed)
    assert _instance(sb, survivor)["State"]["Name"] == "running"
    with pytest.raises(SandboxAdminError) as none:  # no notice for a node EC2 did not reclaim: IMDS's 404
        sb.admin.action("spot_instance_action", instance_id=survivor)
    assert none.value.status == 404
    view = backend.describe(JOB, REGION)
    assert view.secondary_status == "Interrupted" and view.interruptions == 1
    assert view.raw["interruptions"][0]["instance_id"] == reclaimed[0]
    assert len(backend.recover(JOB, REGION)["launched"]) == 1


def test_interrupt_later_posts_the_notice_now_and_keeps_the_nodes_until_then(launched):
    sb, backend, out = launched
    proc = _sandbox_cli(sb, "interrupt", JOB, "--nodes", "2", "--after-seconds", "600")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith(f"Spot reclaim of 2 nodes of {JOB}")
    assert "in 600 s (interruption notice posted now)" in proc.stderr
    for instance_id in out["instance_ids"]:
        assert sb.admin.action("spot_instance_action", instance_id=instance_id)["action"] == "terminate"
        assert _instance(sb, instance_id)["State"]["Name"] == "running"
    sb.admin.reset()  # the pending reclaims end with the sandbox's state


def test_interrupt_refuses_a_job_without_running_spot_nodes_in_one_line(launched):
    sb, backend, out = launched
    sb.client("ec2").terminate_instances(InstanceIds=out["instance_ids"])
    nothing = _sandbox_cli(sb, "interrupt", JOB)
    assert nothing.returncode == 2 and "no running Spot instance" in nothing.stderr
    unknown = _sandbox_cli(sb, "interrupt", "no-such-job")
    assert unknown.returncode == 2 and "no-such-job" in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1


def test_interrupt_at_a_step_reclaims_once_a_node_has_logged_that_step(launched):
    sb, backend, out = launched
    proc = _sandbox_cli(sb, "interrupt", JOB, "--at-step", "7")
    assert proc.returncode == 0, proc.stderr
    assert "when a node logs step 7" in proc.stderr
    logs, host = sb.client("logs"), out["instance_ids"][0]
    group = f"/trainctl/{JOB}"
    if host not in {s["logStreamName"] for s in logs.describe_log_streams(logGroupName=group)["logStreams"]}:
        logs.create_log_stream(logGroupName=group, logStreamName=host)
    put = lambda step: logs.put_log_events(  # noqa: E731 - what the node agent ships from the training
        logGroupName=group, logStreamName=host,
        logEvents=[{"timestamp": int(time.time() * 1000), "message": f"trainctl step={step} loss=1.0 samples_per_s=9"}])
    put(6)
    assert all(_instance(sb, i)["State"]["Name"] == "running" for i in out["instance_ids"])
    put(7)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and all(_instance(sb, i)["State"]["Name"] == "running"
                                              for i in out["instance_ids"]):
        time.sleep(0.1)
    gone = [i for i in out["instance_ids"] if _instance(sb, i)["State"]["Name"] == "terminated"]
    assert len(gone) == 1 and _instance(sb, gone[0])["StateReason"]["Code"] == "Server.SpotInstanceTermination"
