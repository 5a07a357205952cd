"""A `stream` channel given without its final slash (`s3://my-datasets/shards`) is streamed with mount-s3, not
silently copied: mount-s3 refuses a `--prefix` that does not end in '/' (awslabs/mountpoint-s3, prefix.rs), and the
agent used to pass the spec's prefix as it was, so the mount failed and the node copied the whole prefix instead.
The launch's own node config (a CLI dry run against the sandbox) is run by the agent's channel code on a sandbox
instance whose image has the sandbox's mount-s3 (trainctl_sandbox/ec2/mountpoint.py), which refuses as the real one."""
from __future__ import annotations

import base64
import json
import time
from pathlib import Path

from tests.support.data_jobs import FILES, cli, dataset, project

NODE_WAIT_S = 30
USER_DATA = """#!/bin/bash
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_DEFAULT_REGION=us-east-1
exec "$TRAINCTL_PYTHON" - <<'EOF'
import json, os, boto3
from trainctl.bootstrap.channels import Channels, ml_root
channels = Channels(boto3.client("s3"), {"train": json.loads(%r)}, ml_root(os.environ["TRAINCTL_ROOT"]), print)
channels.prepare(0, 1)
path = channels.env()["SM_CHANNEL_TRAIN"]
print("CHANNEL", json.dumps(sorted(os.listdir(path))), flush=True)
EOF
"""


def _launch_channel(sb, tmp_path) -> dict:
    """The `train` channel as the EC2 launch hands it to its nodes (the node agent's config in the user data)."""
    spec = project(tmp_path, "{train: {uri: 's3://my-datasets/shards', mode: stream}}")
    proc = cli(sb, tmp_path / "home", "-o", "json", "launch", spec, "--platform", "ec2", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    (template,) = [r["params"] for r in json.loads(proc.stdout)["requests"] if r["operation"] == "CreateLaunchTemplate"]
    user_data = base64.b64decode(template["LaunchTemplateData"]["UserData"]).decode()
    config = json.loads(user_data.split("<<'TRAINCTL_CONFIG'\n", 1)[1].split("\nTRAINCTL_CONFIG", 1)[0])
    return config["channels"]["train"]


def _console_of_a_node_running(sb, channel: dict) -> str:
    from trainctl_sandbox.server.seed import ami_id

    instance = sb.client("ec2").run_instances(
        ImageId=ami_id("us-east-1", "gpu-pytorch-2.10-al2023"), InstanceType="g5.xlarge", MinCount=1, MaxCount=1,
        UserData=USER_DATA % json.dumps(channel))["Instances"][0]["InstanceId"]
    deadline = time.monotonic() + NODE_WAIT_S
    while time.monotonic() < deadline:
        node = sb.admin.action("instance_nodes")["nodes"].get(instance)
        if node and not node["running"]:
            sb.client("ec2").terminate_instances(InstanceIds=[instance])
            return Path(node["console"]).read_text()
        time.sleep(0.2)
    raise AssertionError(f"instance {instance} not done after {NODE_WAIT_S} s: {sb.admin.action('instance_nodes')}")


def test_a_stream_channel_without_its_final_slash_is_mounted_not_copied(ec2_nodes, tmp_path):
    sb = ec2_nodes
    dataset(sb)
    channel = _launch_channel(sb, tmp_path)
    assert channel["mode"] == "stream" and channel["prefix"] == "shards", channel   # the spec's prefix, as given
    sb.admin.action("configure_instances", mount_s3=True)
    try:
        console = _console_of_a_node_running(sb, channel)
    finally:
        sb.admin.action("configure_instances", mount_s3=False)
    assert "mounted with mount-s3" in console and "copying" not in console, console
    (line,) = [ln for ln in console.splitlines() if ln.startswith("CHANNEL ")]
    assert json.loads(line.split(" ", 1)[1]) == [f"part-{i:03d}.txt" for i in range(FILES)], console
