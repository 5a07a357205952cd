"""EC2 jobs after launch, against the sandbox: describe, logs, recovery from lost nodes, stop, `trainctl down`."""
from __future__ import annotations

import json
import time

from tests.support.helpers import run_cli
from tests.support.ec2_jobs import SPEC, leftovers, live, option
from trainctl.aws import clients as aws
from trainctl.backends.base import LaunchSettings
from trainctl.backends.ec2 import Ec2Backend, log_group
from trainctl.backends.options import Ec2Options
from trainctl.spec import load_spec


def _reclaim(sb, instance_id):
    # EC2's Spot reclaim (the notice, then Server.SpotInstanceTermination): the only loss recovery replaces.
    sb.admin.action("reclaim_spot_instances", job="job-1", instance_ids=[instance_id])


def test_describe_shows_instances_cost_and_the_job_settings(launched):
    sb, backend, out = launched
    view = backend.describe("job-1", "us-east-1")
    assert view.status == "InProgress" and view.secondary_status == "Training"
    assert sorted(view.hosts) == sorted(out["instance_ids"])
    assert view.count == 2 and view.market == "spot" and view.instance_type == "g5.12xlarge"
    assert view.interruptions == 0
    assert view.raw["HyperParameters"]["steps"] == "20"
    assert {i["availability_zone"] for i in view.raw["instances"]} == {"us-east-1a"}
    assert view.raw["cost_usd"] >= 0 and view.billable_seconds is not None


def test_logs_of_every_host_in_time_order_with_a_cursor(launched):
    sb, backend, out = launched
    cw = sb.client("logs")
    now = int(time.time() * 1000)
    for n, host in enumerate(out["instance_ids"]):  # each node's agent checked in: its stream exists
        cw.put_log_events(logGroupName=log_group("job-1"), logStreamName=host, logEvents=[
            {"timestamp": now + n, "message": f"trainctl step=10 loss=2.0 samples_per_s={100 + n}"}])
    lines, cursor = backend.logs("job-1", "us-east-1", None)
    assert [ln.host for ln in lines] == out["instance_ids"]
    assert backend.logs("job-1", "us-east-1", cursor)[0] == []
    host = out["instance_ids"][0]
    cw.put_log_events(logGroupName=log_group("job-1"), logStreamName=host,
                      logEvents=[{"timestamp": now + 5, "message": "trainctl step=20 loss=1.0 samples_per_s=101"}])
    more, _ = backend.logs("job-1", "us-east-1", cursor)
    assert [ln.message for ln in more] == ["trainctl step=20 loss=1.0 samples_per_s=101"]


def test_recover_relaunches_a_lost_node_in_the_same_az_and_records_the_interruption(launched):
    sb, backend, out = launched
    lost = out["instance_ids"][1]
    _reclaim(sb, lost)
    view = backend.describe("job-1", "us-east-1")
    assert view.secondary_status == "Interrupted" and view.interruptions == 1
    assert view.raw["interruptions"][0]["instance_id"] == lost
    result = backend.recover("job-1", "us-east-1")
    assert result["missing"] == 1 and len(result["launched"]) == 1 and not result["moved"]
    assert result["availability_zone"] == "us-east-1a"
    now = live(sb)
    assert len(now) == 2 and {i["Placement"]["GroupName"] for i in now} == {"trainctl-job-1"}
    view = backend.describe("job-1", "us-east-1")
    assert view.secondary_status == "Training" and view.interruptions == 1
    assert backend.recover("job-1", "us-east-1")["launched"] == []  # whole again: nothing to do


def test_recover_moves_the_job_when_its_az_is_full(launched):
    sb, backend, out = launched
    _reclaim(sb, out["instance_ids"][0])
    sb.admin.set_capacity("g5.12xlarge", "us-east-1a", False)
    messages = []
    result = backend.recover("job-1", "us-east-1", messages.append)
    assert result["moved"] and result["availability_zone"] != "us-east-1a"
    now = live(sb)
    assert len(now) == 2 and {i["Placement"]["AvailabilityZone"] for i in now} == {result["availability_zone"]}
    # The survivor moved with the job; trainctl ended it, so it is not an interruption.
    assert backend.describe("job-1", "us-east-1").interruptions == 1
    assert any("moving the whole job" in m for m in messages)


def test_stop_then_completed_markers(launched):
    sb, backend, out = launched
    backend.stop("job-1", "us-east-1", grace_s=0)  # no agent runs here (tests/sandbox/stop_down/test_ec2_stop_grace.py)
    view = backend.describe("job-1", "us-east-1")
    assert view.status == "Stopped" and view.hosts == () and view.interruptions == 0
    assert backend.recover("job-1", "us-east-1")["launched"] == []


def test_down_removes_everything_and_is_safe_to_repeat(launched, tmp_path):
    sb, backend, out = launched
    # job-1 was launched by the backend directly, so the store does not know it: --platform names it
    args = ["--region", "us-east-1", "--output", "json", "down", "job-1", "--platform", "ec2"]
    first = run_cli(args, tmp_path / "home", env=sb.env)
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert {f"instance {i}" for i in out["instance_ids"]} <= set(doc["removed"])
    assert any(r.startswith("security group") for r in doc["removed"])
    assert leftovers(sb) == []
    view = backend.describe("job-1", "us-east-1")
    assert view.status == "Stopped" and "trainctl down" in view.failure_reason
    again = run_cli(args, tmp_path / "home", env=sb.env)
    assert again.returncode == 0 and json.loads(again.stdout)["removed"] == []
    table = run_cli(["--region", "us-east-1", "down", "job-1", "--platform", "ec2"], tmp_path / "home", env=sb.env)
    assert table.returncode == 0 and "nothing tagged trainctl:job=job-1" in table.stderr


def test_recover_relaunches_a_lost_single_node_in_its_own_az_first(sandbox_env, tmp_path):
    from trainctl.backends.ec2.prepare import az_order

    aws.reset_session()
    path = tmp_path / "job.yaml"
    path.write_text(SPEC)
    backend = Ec2Backend()
    ec2 = sandbox_env.client("ec2")
    subnets = sorted({s["AvailabilityZone"] for s in ec2.describe_subnets()["Subnets"]})
    home = az_order(aws.client("ec2", "us-east-1"), "us-east-1", "g5.12xlarge", 1, "spot", None, subnets, [])[-1]
    request = backend.prepare(option("g5.12xlarge", 1, "spot", home), load_spec(path),
                              LaunchSettings(job_id="job-1", spec_path=str(path), options=Ec2Options()))
    (lost,) = backend.submit(request)["instance_ids"]
    _reclaim(sandbox_env, lost)  # the job's only node: nothing is left to say where it ran but the lost one
    result = backend.recover("job-1", "us-east-1")
    assert result["availability_zone"] == home and not result["moved"], result["messages"]
    assert {i["Placement"]["AvailabilityZone"] for i in live(sandbox_env)} == {home}
    aws.reset_session()
