"""A job on an EC2 Capacity Block meets the block's end: its node agent reads the end from EC2 while it runs
(bootstrap/block_end.py), checkpoints and stops at EC2's 40-minute warning as on a Spot notice, and says that the
block ends; then `launch --resume-from JOB` on the plan's next option (On-Demand, its quota raised) starts a new job
from that job's checkpoints. The sandbox sells the block, runs the node agent, and brings the block's end near
(`end_capacity_block` with `in_seconds`), as a day of waiting would."""
from __future__ import annotations

import json

import pytest
import yaml

from tests.support.capacity_blocks import P_ON_DEMAND, block_wins
from tests.support.ec2_jobs import end_earlier_nodes, until
from tests.support.helpers import run_cli
from trainctl_sandbox.testing import add_nat

REGION = "us-west-2"
ARGS = {"model": "vit_micro", "steps": 100000, "device": "cpu", "bf16": False,
        "checkpoint-every": 200, "log-every": 50, "checkpoint-seconds": 0}


def _cli(sb, home, *args: str) -> dict | str:
    proc = run_cli(["--output", "json", *args], home, env={**sb.env, "TRAINCTL_CACHE_TTL": "0"}, timeout=300)
    assert proc.returncode == 0, (args, proc.stdout[-2000:], proc.stderr[-3000:])
    return proc



def _keys(sb, prefix: str) -> list[str]:
    s3 = sb.client("s3", REGION)
    bucket = next(b["Name"] for b in s3.list_buckets()["Buckets"] if b["Name"].endswith(REGION))
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])]


def _logs(sb, home, job: str) -> str:
    return run_cli(["logs", job], home, env=sb.env, timeout=120).stdout


@pytest.mark.timeout(1500)
def test_a_job_on_a_block_checkpoints_at_its_end_and_resumes_on_the_next_option(ec2_nodes, tmp_path):
    sb, home = ec2_nodes, tmp_path / "home"
    end_earlier_nodes(sb)
    add_nat(sb, REGION)  # p4d's nodes have no public IPv4: they reach AWS by a NAT
    spec = block_wins(sb, tmp_path, starts=(0, 15))
    doc = yaml.safe_load(open(spec))
    doc["entrypoint"]["args"] = ARGS
    open(spec, "w").write(yaml.safe_dump(doc))
    job = json.loads(_cli(sb, home, "launch", spec, "--yes", "--buy-capacity-block").stdout)["job_id"]
    (block,) = [b for rs in sb.admin.action("capacity_blocks")["bought"].values() for b in rs]
    # a checkpoint synced (200 steps apart: the agent uploads a checkpoint once it has settled, bootstrap/checkpoints.py)
    until("a checkpoint in S3", lambda: _keys(sb, f"{job}/checkpoints/"))
    # the block's end comes near: EC2's warning time (40 minutes before the end) is now
    sb.admin.action("end_capacity_block", reservation_id=block["CapacityReservationId"], in_seconds=40 * 60)
    said = until("the node's stop at the block's end",
                  lambda: "stopped rank=0" in (text := _logs(sb, home, job)) and text)
    assert "trainctl-agent: notice: the capacity block ends at " in said and "checkpointing" in said, said[-3000:]
    stopped = int(said.split("stopped rank=0 step=")[1].split()[0])
    # the block ends: EC2 terminates its instance; the job's checkpoints stay in S3
    sb.admin.action("end_capacity_block", reservation_id=block["CapacityReservationId"])
    saved = until("the stop's checkpoint in S3",
                   lambda: [k for k in _keys(sb, f"{job}/checkpoints/") if f"ckpt-{stopped:010d}-" in k])
    # the plan's next option, the first that is no block (On-Demand: Spot misses the deadline), its quota now
    # raised, from the job's checkpoints
    sb.admin.set_quota("ec2", P_ON_DEMAND, 96)
    _cli(sb, home, "stop", job)  # the block's job is over (else the launch refuses a second job of the spec)
    options = json.loads(_cli(sb, home, "plan", spec).stdout)["options"]
    nxt = next(o for o in options if o["market"] != "capacity-block")
    proc = _cli(sb, home, "launch", spec, "--option", str(nxt["rank"]), "--yes", "--resume-from", job)
    again = json.loads(proc.stdout)["job_id"]
    assert again != job and f"resuming from {job}" in " ".join(proc.stderr.split()), proc.stderr[-2000:]
    resumed = until("the new job's resume", lambda: "trainctl resume step=" in (t := _logs(sb, home, again)) and t)
    assert f"trainctl resume step={stopped} " in resumed, (saved, resumed[-3000:])
    for each in (again, job):
        _cli(sb, home, "down", each)
