"""A sandbox stopped and started again keeps its EC2 (issue 35), as a user meets it through `trainctl sandbox up
--detach` / `down`: the instances, their tags, launch times and placement groups are still there, and an EC2 job
whose nodes ran at the stop is not "running" forever with nothing behind it: its nodes ended with the sandbox
(terminated, Server.InternalError, at the stop: sandbox/trainctl_sandbox/ec2/restart.py), so `ls` shows it Failed
and its cost stops at the stop."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import boto3

from trainctl_sandbox.admin import SandboxAdmin
from trainctl_sandbox.server import process

SPEC = """\
name: ec2-kept
entrypoint: {bundled: ddp, args: {model: vit_micro, batch-size: 8, steps: 20, device: cpu, bf16: false}}
model: {architecture: vit_micro}
workload: {samples: 1000, batch_size_per_accelerator: 8}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((process.HOST, 0))
        return s.getsockname()[1]


def _trainctl(*args: str, home: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run([sys.executable, "-m", "trainctl.cli", *args], capture_output=True, text=True, timeout=300,
                          env={**base, **(env or {}), "TRAINCTL_HOME": str(home)})


def _jobs(home: Path, env: dict) -> list[dict]:
    done = _trainctl("-o", "json", "ls", home=home, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["jobs"]


def _instances(ec2) -> dict[str, dict]:
    return {i["InstanceId"]: i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]}


def test_a_restarted_sandbox_keeps_its_ec2_and_ends_the_nodes_that_ran_with_it(tmp_path):
    port = _free_port()
    endpoint = f"http://{process.HOST}:{port}"
    sandbox_home, user = tmp_path / "sandbox", tmp_path / "user"
    user_env = {**process.sandbox_env(endpoint), "AWS_CONFIG_FILE": str(user / "none"),
                "AWS_SHARED_CREDENTIALS_FILE": str(user / "none")}
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC)
    try:
        up = _trainctl("sandbox", "up", "--detach", "--port", str(port), home=sandbox_home)
        assert up.returncode == 0, up.stderr
        SandboxAdmin(endpoint).action("configure_instances", run_user_data=False)  # the check-in stands in
        launched = _trainctl("launch", str(spec), "--platform", "ec2", "--layout", "g5.xlarge:1:on-demand", "--yes",
                             home=user, env=user_env)
        assert launched.returncode == 0, launched.stderr
        [job] = _jobs(user, user_env)
        assert job["status"] not in ("Failed", "Completed", "Stopped"), job
        ec2 = boto3.client("ec2", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                           aws_secret_access_key="testing")
        ec2.create_placement_group(GroupName="kept-group", Strategy="cluster")
        before = _instances(ec2)
        groups = ec2.describe_placement_groups()["PlacementGroups"]  # the job's own and the user's
        assert "kept-group" in [g["GroupName"] for g in groups]
        assert [i["State"]["Name"] for i in before.values()] == ["running"]
        assert _trainctl("sandbox", "down", home=sandbox_home).returncode == 0

        again = _trainctl("sandbox", "up", "--detach", "--port", str(port), home=sandbox_home)
        assert again.returncode == 0 and "the account the last sandbox kept" in again.stderr, again.stderr
        after = _instances(ec2)
        assert after.keys() == before.keys()
        for iid, inst in after.items():
            assert inst["State"]["Name"] == "terminated" and inst["StateReason"]["Code"] == "Server.InternalError"
            assert "sandbox stopped while the instance ran" in inst["StateReason"]["Message"]
            assert inst["LaunchTime"] == before[iid]["LaunchTime"] and inst["Tags"] == before[iid]["Tags"]
        assert ec2.describe_placement_groups()["PlacementGroups"] == groups
        # the default VPC is the kept one, not seeded a second internet gateway
        assert len(ec2.describe_internet_gateways()["InternetGateways"]) == 1
        [kept] = _jobs(user, user_env)
        assert (kept["job_id"], kept["status"]) == (job["job_id"], "Failed"), kept
        assert kept["cost_usd"] == _jobs(user, user_env)[0]["cost_usd"]  # billed up to the stop, not since
    finally:
        _trainctl("sandbox", "down", home=sandbox_home)
