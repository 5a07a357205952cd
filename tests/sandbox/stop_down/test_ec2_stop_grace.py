"""`trainctl stop` of an EC2 job gives the nodes' agents their graceful path: the stop mark
first, then a bounded wait while the agents checkpoint, upload and shut their nodes down, and only then a
terminate of the nodes still running, so a node whose agent is dead never bills forever. Through the CLI against
the sandbox; the agents' part is played by a thread that, once it sees the mark, writes a checkpoint and shuts
each node down from inside (the sandbox's `shutdown_instance`: `shutdown -h`, which the launch template makes a
terminate); the sandbox runs no agent on its instances."""
from __future__ import annotations

import json
import threading
import time

from tests.support.helpers import run_cli
from tests.support.ec2_jobs import JOB, REGION, job_bucket, stop_mark
from trainctl.backends.ec2.common import TERMINATED_BY_TAG, tag_map

STOP = ["--region", REGION, "--output", "json", "stop", JOB, "--platform", "ec2"]


def _states(sb, ids: list[str]) -> dict[str, dict]:
    found = sb.client("ec2").describe_instances(InstanceIds=ids)["Reservations"]
    return {i["InstanceId"]: i for r in found for i in r["Instances"]}


def _agents(sb, ids: list[str], seen: list[bool]) -> threading.Thread:
    """The nodes' agents: each reads the mark, checkpoints, uploads, then shuts its node down. Records whether
    the mark was there when they did (bounded: a stop that never writes the mark leaves the nodes running)."""
    def run() -> None:
        for _ in range(600):
            if stop_mark(sb):
                sb.client("s3").put_object(Bucket=job_bucket(sb), Key=f"{JOB}/checkpoints/ckpt-0000000020.pt",
                                           Body=b"stopped at 20")
                seen.append(True)
                for instance_id in ids:
                    sb.admin.action("shutdown_instance", instance_id=instance_id)
                return
            time.sleep(0.05)
        seen.append(False)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_stop_waits_for_the_nodes_that_stop_themselves_and_terminates_none(launched, tmp_path):
    sb, backend, out = launched
    nodes = out["instance_ids"]
    seen: list[bool] = []
    agents = _agents(sb, nodes, seen)
    proc = run_cli([*STOP, "--grace-seconds", "120"], tmp_path / "home", env=sb.env)
    agents.join(timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert seen == [True], "the nodes were gone before the job carried its stop mark"
    doc = json.loads(proc.stdout)
    assert sorted(doc["stopped_themselves"]) == sorted(nodes) and doc["terminated"] == []
    assert doc["grace_seconds"] == 120 and doc["stop_mark"] is True
    assert "waiting up to 120 s for the 2 nodes to checkpoint and shut down" in proc.stderr
    assert "2 nodes stopped themselves" in proc.stderr and "terminated" not in proc.stderr
    # trainctl ended none of them: no node carries its terminated-by tag.
    assert all(TERMINATED_BY_TAG not in tag_map(i) for i in _states(sb, nodes).values())
    assert {i["StateReason"]["Code"] for i in _states(sb, nodes).values()} == {"Client.InstanceInitiatedShutdown"}
    view = backend.describe(JOB, REGION)
    assert view.status == "Stopped" and view.interruptions == 0


def test_stop_terminates_the_nodes_that_did_not_stop_within_the_grace(launched, tmp_path):
    sb, backend, out = launched
    nodes = out["instance_ids"]
    proc = run_cli([*STOP, "--grace-seconds", "1"], tmp_path / "home", env=sb.env)  # no agent answers
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["stopped_themselves"] == [] and sorted(doc["terminated"]) == sorted(nodes)
    assert "waiting up to 1 s" in proc.stderr and "terminated 2 nodes that did not stop in time" in proc.stderr
    states = _states(sb, nodes)
    assert all(i["State"]["Name"] in ("shutting-down", "terminated") for i in states.values())
    assert all(tag_map(i).get(TERMINATED_BY_TAG) == "trainctl" for i in states.values())
    assert stop_mark(sb)
    view = backend.describe(JOB, REGION)
    assert view.status == "Stopped" and view.interruptions == 0


def test_stop_terminates_only_the_node_left_when_one_stopped_itself(launched, tmp_path):
    sb, backend, out = launched
    first, second = out["instance_ids"]
    seen: list[bool] = []
    agents = _agents(sb, [first], seen)  # the second node's agent is dead
    proc = run_cli(["--region", REGION, "stop", JOB, "--platform", "ec2", "--grace-seconds", "4"],
                   tmp_path / "home", env=sb.env)
    agents.join(timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert seen == [True]
    lines = proc.stderr.strip().splitlines()
    assert lines[0] == "stop mark written; waiting up to 4 s for the 2 nodes to checkpoint and shut down", lines
    # never silent while it waits: the count left, as soon as it changes
    assert lines[1].startswith("1 node still running; terminating it in ") and lines[1].endswith(
        " unless it stops first"), lines
    assert lines[2:4] == ["1 node stopped itself", "terminated 1 node that did not stop in time"], lines
    states = _states(sb, [first, second])
    assert TERMINATED_BY_TAG not in tag_map(states[first])
    assert tag_map(states[second]).get(TERMINATED_BY_TAG) == "trainctl"
    assert proc.stdout == ""  # the table output is the lines on stderr


def test_grace_seconds_is_refused_for_a_sagemaker_job_before_anything_is_stopped(sandbox_env, tmp_path):
    proc = run_cli(["--region", REGION, "stop", "sm-job-1", "--platform", "sagemaker", "--grace-seconds", "30"],
                   tmp_path / "home", env=sandbox_env.env)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "--grace-seconds applies to EC2 jobs" in proc.stderr

