"""An elastic 4-node EC2 job (`elastic: {min_nodes: 3}`, the bundled ViT, vit_micro) in the sandbox, real node agents
and torchrun: a Spot reclaim takes the first node (rank 0, the master) while the sandbox has no capacity for a
replacement, and the three survivors keep training (a new generation with a new master, the same global batch);
once capacity is back, the survivors' lowest node launches the fourth itself (no `watch` runs: unattended recovery,
bootstrap/replacement.py), which joins at the next membership change, and the job trains on four again. The job is long on purpose (it must still be training when the fourth node
comes): `down` ends it once it has trained on four."""
from __future__ import annotations

import ipaddress
import json
import re
import time

import pytest

from tests.support.ec2_jobs import end_earlier_nodes
from tests.support.helpers import run_cli

REGION, TYPE, STEPS = "us-east-1", "g5.xlarge", 5000
SPEC = f"""\
name: elastic-vit
entrypoint: {{bundled: ddp, args: {{model: vit_micro, batch-size: 4, steps: {STEPS}, device: cpu, bf16: false,
                                   checkpoint-every: 5, log-every: 5, checkpoint-seconds: 0}}}}
model: {{architecture: vit_micro}}
workload: {{samples: {STEPS * 16}, batch_size_per_accelerator: 4}}
elastic: {{min_nodes: 3}}
"""
CEILING_S = 240  # a broken job fails the test instead of hanging it; not a performance bound


def _logs(sb, job: str) -> str:
    logs, lines, token = sb.client("logs", REGION), [], None
    while True:
        page = logs.filter_log_events(logGroupName=f"/trainctl/{job}", **({"nextToken": token} if token else {}))
        lines += [(e["timestamp"], e["message"]) for e in page["events"]]
        token = page.get("nextToken")
        if not token:
            return "\n".join(m for _, m in sorted(lines, key=lambda item: item[0]))


def _wait_for(sb, job: str, pattern: str) -> str:
    deadline, text = time.monotonic() + CEILING_S, ""
    while time.monotonic() < deadline:
        try:
            text = _logs(sb, job)
        except sb.client("logs", REGION).exceptions.ResourceNotFoundException:
            text = ""
        if re.search(pattern, text, re.S):
            return text
        time.sleep(1)
    raise AssertionError(f"no {pattern!r} in the job's logs:\n{text[-4000:]}")


@pytest.mark.timeout(600)  # measured 414 s at a load average of 18 on 2 cores
def test_the_survivors_train_on_three_nodes_then_the_replacement_joins(ec2_nodes, tmp_path):
    sb, home = ec2_nodes, tmp_path / "home"
    end_earlier_nodes(sb)
    room = sb.admin.action("configure_instances")["max_nodes"]
    sb.admin.action("configure_instances", max_nodes=5)   # four nodes and the replacement on this machine
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC)
    launched = run_cli(["--output", "json", "--region", REGION, "launch", str(spec), "--platform", "ec2",
                        "--layout", f"{TYPE}:4:spot", "--yes"], home, env=sb.env)
    assert launched.returncode == 0, launched.stderr
    job = json.loads(launched.stdout)["job_id"]
    try:
        sb.admin.set_capacity(TYPE, available=False)   # the replacement cannot come yet
        nodes = [i for r in sb.client("ec2", REGION).describe_instances(Filters=[
            {"Name": "tag:trainctl:job", "Values": [job]}])["Reservations"] for i in r["Instances"]]
        first = min(nodes, key=lambda i: ipaddress.ip_address(i["PrivateIpAddress"]))["InstanceId"]
        sb.admin.action("reclaim_spot_instances", job=job, instance_ids=[first], at_step=10, after_seconds=3)
        # the survivors: generation 2 of three nodes, the step's global batch (16) over 3 ranks, and progress
        _wait_for(sb, job, r"membership generation 2: 3 nodes.*elastic global_batch=16 chunks=4 world_size=3"
                           r".*trainctl checkpoint step=")
        sb.admin.set_capacity(TYPE, available=True)
        logs = _wait_for(sb, job, r"world_size=3.*membership generation \d+: 4 nodes.*trainctl start device=cpu "
                                  r"world_size=4.*trainctl resume step=\d+.*trainctl checkpoint step=")
    finally:
        sb.admin.set_capacity(TYPE, available=True)
        down = run_cli(["down", job], home, env=sb.env, timeout=CEILING_S)
        sb.admin.action("configure_instances", max_nodes=room)
    assert down.returncode == 0, down.stderr[-2000:]
    assert "elastic global_batch" not in logs.split("membership generation 2", 1)[0]   # four nodes: a chunk each
    resumed = [int(s) for s in re.findall(r"trainctl resume step=(\d+) ", logs)]
    assert len(resumed) >= 2 and resumed == sorted(resumed)   # each generation went on from the last checkpoint
