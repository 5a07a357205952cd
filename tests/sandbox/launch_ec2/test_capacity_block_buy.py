"""Buying an EC2 Capacity Block and launching into it, through the CLI against the sandbox: `--buy-capacity-block`
buys the plan's block (its fee said before, its reservation after), `--dry-run` shows the purchase and buys nothing,
a re-run never buys a second block, a block that has not started leaves the job waiting (`ls` and `watch` say so)
until a later launch starts that same job in it, and `down` removes the instances and says the block stays (AWS
cannot cancel one)."""
from __future__ import annotations

import json

from tests.support.capacity_blocks import block_wins
from tests.support.helpers import run_cli
from trainctl_sandbox.testing import add_nat


def _cli(sandbox, tmp_path, *args: str, ok: tuple[int, ...] = (0,)):
    proc = run_cli(list(args), tmp_path / "home", env={**sandbox.env, "TRAINCTL_CACHE_TTL": "0"}, timeout=200)
    assert proc.returncode in ok, (args, proc.stdout, proc.stderr)
    return proc


def _spec(sandbox, tmp_path, starts: tuple[float, ...]) -> str:
    add_nat(sandbox, "us-west-2")  # p4d's nodes have no public IPv4 (four network cards): they reach AWS by a NAT
    return block_wins(sandbox, tmp_path, starts=starts)


def _bought(sandbox) -> list[dict]:
    return [b for rs in sandbox.admin.action("capacity_blocks")["bought"].values() for b in rs]


def _job_instances(sandbox, job: str) -> list[dict]:
    ec2 = sandbox.client("ec2", "us-west-2")
    found = ec2.describe_instances(Filters=[{"Name": "tag:trainctl:job", "Values": [job]},
                                            {"Name": "instance-state-name", "Values": ["pending", "running"]}])
    return [i for r in found["Reservations"] for i in r["Instances"]]


def test_dry_run_shows_the_purchase_then_buy_launch_into_the_block_and_down(sandbox, tmp_path):
    spec = _spec(sandbox, tmp_path, starts=(0, 15))
    doc = json.loads(_cli(sandbox, tmp_path, "-o", "json", "launch", spec, "--dry-run").stdout)
    purchase = doc["capacity_block_purchase"]
    assert purchase["operation"] == "ec2:PurchaseCapacityBlock" and purchase["upfront_fee_usd"] > 0
    assert purchase["params"]["InstancePlatform"] == "Linux/UNIX"
    assert {t["Key"] for t in purchase["params"]["TagSpecifications"][0]["Tags"]} == {"trainctl:job", "trainctl:spec"}
    (run,) = [r for r in doc["requests"] if r["operation"] == "RunInstances"]
    assert run["params"]["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert run["params"]["CapacityReservationSpecification"]["CapacityReservationTarget"] == {
        "CapacityReservationId": "${capacity_reservation_id}"}
    assert not [r for r in doc["requests"] if r["operation"] in ("CreateFleet", "CreatePlacementGroup")]
    assert _bought(sandbox) == []

    proc = _cli(sandbox, tmp_path, "-o", "json", "launch", spec, "--yes", "--buy-capacity-block")
    err = " ".join(proc.stderr.split())
    (block,) = _bought(sandbox)
    assert "cannot be undone" in err and f"reservation {block['CapacityReservationId']}" in err
    assert err.index("cannot be undone") < err.index("bought capacity block")   # the fee is said before buying
    job = json.loads(proc.stdout)["job_id"]
    assert {t["Key"]: t["Value"] for t in block["Tags"]} == {"trainctl:job": job, "trainctl:spec": "block-test"}
    nodes = _job_instances(sandbox, job)
    assert len(nodes) == 1 and nodes[0]["Placement"]["AvailabilityZone"] == block["AvailabilityZone"]
    down = _cli(sandbox, tmp_path, "-o", "json", "down", job)
    removed = json.loads(down.stdout)["removed"]
    assert any(f"capacity block {block['CapacityReservationId']} kept: a Capacity Block cannot be cancelled" in r
               for r in removed), removed
    assert _job_instances(sandbox, job) == []


def test_a_block_that_starts_later_waits_then_the_same_job_starts_in_it_and_nothing_is_bought_twice(sandbox,
                                                                                                   tmp_path):
    spec = _spec(sandbox, tmp_path, starts=(1, 15))
    first = _cli(sandbox, tmp_path, "-o", "json", "launch", spec, "--yes", "--buy-capacity-block")
    job = json.loads(first.stdout)["job_id"]
    (block,) = _bought(sandbox)
    assert "waiting for the block, starts" in first.stderr and _job_instances(sandbox, job) == []
    listed = json.loads(_cli(sandbox, tmp_path, "-o", "json", "ls").stdout)
    assert next(j for j in listed["jobs"] if j["job_id"] == job)["status"].startswith("waiting for the block, starts")
    watched = _cli(sandbox, tmp_path, "watch", job, "--once")
    assert "waiting for the block" in watched.stderr
    # the plan offers the held block first, at no new cost (its fee is sunk)
    first = json.loads(_cli(sandbox, tmp_path, "-o", "json", "plan", spec).stdout)["options"][0]
    assert first["capacity_block"]["reservation_id"] == block["CapacityReservationId"]
    assert first["capacity_block"]["upfront_fee_usd"] == 0 and "already holds" in " ".join(first["why"])
    again = _cli(sandbox, tmp_path, "-o", "json", "launch", spec, "--yes", "--buy-capacity-block")
    assert "buying nothing" in again.stderr and json.loads(again.stdout)["job_id"] == job
    assert len(_bought(sandbox)) == 1
    sandbox.admin.action("start_capacity_block", reservation_id=block["CapacityReservationId"])
    started = _cli(sandbox, tmp_path, "-o", "json", "launch", spec, "--yes")  # a held block needs no flag
    assert json.loads(started.stdout)["job_id"] == job and len(_bought(sandbox)) == 1
    assert len(_job_instances(sandbox, job)) == 1
    _cli(sandbox, tmp_path, "down", job)


def test_a_launch_that_cannot_be_prepared_buys_nothing(sandbox, tmp_path):
    """No NAT: p4d's nodes (no public IPv4) could not reach AWS, so the launch stops before the fee is charged."""
    spec = block_wins(sandbox, tmp_path, starts=(0, 15))
    proc = _cli(sandbox, tmp_path, "launch", spec, "--yes", "--buy-capacity-block", ok=(2,))
    assert "no public IPv4" in proc.stderr and _bought(sandbox) == []
