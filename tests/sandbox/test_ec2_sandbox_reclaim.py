"""`trainctl sandbox interrupt JOB` on an EC2 job does what a Spot reclaim does: EC2 posts the
instance-action notice, then terminates the instance with StateReason Server.SpotInstanceTermination; trainctl
counts it as an interruption and `watch --recover` brings the node back. A SageMaker job is interrupted as
before (sandbox/tests)."""
from __future__ import annotations

import pytest

from tests.support.helpers import run_cli
from tests.sandbox.test_ec2_watch import launched  # noqa: F401 - the fixture
from trainctl_sandbox.admin import SandboxAdminError

JOB, REGION = "job-1", "us-east-1"


def _sandbox_cli(sb, *args: str):
    # The session's sandbox is found through TRAINCTL_HOME, as `trainctl sandbox ...` finds a running one.
    return run_cli(["sandbox", *args], sb.state_dir.parent, env=sb.env)


def _instance(sb, instance_id: str) -> dict:
    return sb.client("ec2").describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]


def test_interrupt_reclaims_one_spot_node_of_an_ec2_job_and_recover_replaces_it(launched):  # noqa: F811
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


def test_interrupt_later_posts_the_notice_now_and_keeps_the_nodes_until_then(launched):  # noqa: F811
    sb, backend, out = launched
    proc = _sandbox_cli(sb, "interrupt", JOB, "--nodes", "2", "--after-seconds", "600")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith(f"Spot reclaim of 2 nodes of {JOB}")
    assert "in 600 s (interruption notice posted now)" in proc.stderr
    for instance_id in out["instance_ids"]:
        assert sb.admin.action("spot_instance_action", instance_id=instance_id)["action"] == "terminate"
        assert _instance(sb, instance_id)["State"]["Name"] == "running"
    sb.admin.reset()  # the pending reclaims end with the sandbox's state


def test_interrupt_refuses_what_an_ec2_job_cannot_do_in_one_line(launched):  # noqa: F811
    sb, backend, out = launched
    at_step = _sandbox_cli(sb, "interrupt", JOB, "--at-step", "5")
    assert at_step.returncode == 2 and len(at_step.stderr.strip().splitlines()) == 1
    assert "--at-step" in at_step.stderr and "--after-seconds" in at_step.stderr
    sb.client("ec2").terminate_instances(InstanceIds=out["instance_ids"])
    nothing = _sandbox_cli(sb, "interrupt", JOB)
    assert nothing.returncode == 2 and "no running Spot instance" in nothing.stderr
    unknown = _sandbox_cli(sb, "interrupt", "no-such-job")
    assert unknown.returncode == 2 and "no-such-job" in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1
