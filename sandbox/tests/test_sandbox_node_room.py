"""The machine's room for nodes counts the nodes that really run (issue 35): a Spot node in its interruption notice
is on its way out, so its replacement starts even where the room is one node (a 2-CPU machine's default is 2, and a
2-node job's replacement was refused while the reclaimed node was still in its notice)."""
from __future__ import annotations

from trainctl_sandbox.server import seed

JOB = "room-job"


def _run(ec2, image: str) -> str:
    return ec2.run_instances(
        ImageId=image, InstanceType="g5.xlarge", MinCount=1, MaxCount=1, UserData="#!/bin/bash\nsleep 600\n",
        InstanceMarketOptions={"MarketType": "spot"},
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "trainctl:job", "Value": JOB}]}],
    )["Instances"][0]["InstanceId"]


def test_a_node_in_its_interruption_notice_leaves_room_for_its_replacement(ec2_nodes):
    sb = ec2_nodes
    sb.admin.action("configure_instances", max_nodes=1)
    ec2 = sb.client("ec2")
    image = seed.ami_id("us-east-1", seed.DLAMIS[0].key)
    started = []
    try:
        started.append(_run(ec2, image))
        assert started[0] in sb.admin.action("instance_nodes")["nodes"]
        sb.admin.action("reclaim_spot_instances", job=JOB, after_seconds=300)   # the notice now, the end later
        started.append(_run(ec2, image))
        nodes = sb.admin.action("instance_nodes")["nodes"]
        assert started[1] in nodes, nodes   # it runs: not refused for want of room
    finally:
        if started:
            ec2.terminate_instances(InstanceIds=started)
