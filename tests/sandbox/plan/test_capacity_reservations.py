"""On-Demand Capacity Reservations the account holds, in the plan through the CLI against the sandbox: one that
matches the layout (type, Region, room for its nodes, Linux/UNIX, active) is the first option at no new cost and
says it is already held; one of another type, with too few free, for another platform, or cancelled is not
offered."""
from __future__ import annotations

import json

from tests.support.capacity_reservations import REGION, reserve, write_spec
from tests.support.helpers import run_cli


def plan(sandbox, tmp_path, *args: str) -> dict | str:
    proc = run_cli([*args, "plan", write_spec(tmp_path)], tmp_path / "home",
                   env={**sandbox.env, "TRAINCTL_CACHE_TTL": "0", "COLUMNS": "120"})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout) if args else proc.stdout


def reserved(doc: dict) -> list[dict]:
    return [o for o in doc["options"] if "capacity_reservation" in o]


def test_a_matching_reservation_ranks_first_at_no_new_cost(sandbox, tmp_path):
    rid = reserve(sandbox)
    doc = plan(sandbox, tmp_path, "-o", "json")
    first = doc["options"][0]
    assert first["capacity_reservation"]["reservation_id"] == rid, doc["options"]
    assert first["market"] == "on-demand" and first["availability_zone"] == "us-east-1b"
    assert first["expected_cost_usd"] == first["cost_p90_usd"] == 0.01
    assert first["price_source"] == "DescribeCapacityReservations"
    why = " ".join(first["why"])
    assert "already holds" in why and "no new cost" in why
    on_demand = next(o for o in doc["options"] if o["market"] == "on-demand" and "capacity_reservation" not in o)
    assert on_demand["expected_cost_usd"] > 1 and first["hours"] == on_demand["hours"]
    table = plan(sandbox, tmp_path).splitlines()   # the table's row says the reservation is held
    assert [line for line in table if "on-demand (held)" in line and "us-east-1b" in line and "$0.01" in line]


def test_a_reservation_that_does_not_fit_is_not_offered(sandbox, tmp_path):
    reserve(sandbox, itype="g5.2xlarge")                                # another type
    few = reserve(sandbox, count=1)                                     # too few for 2 nodes
    reserve(sandbox, InstancePlatform="Windows")                        # not trainctl's platform
    gone = reserve(sandbox)
    sandbox.client("ec2", REGION).cancel_capacity_reservation(CapacityReservationId=gone)   # cancelled
    doc = plan(sandbox, tmp_path, "-o", "json")
    assert reserved(doc) == [] and doc["options"][0]["market"] == "spot"
    assert any(f"capacity reservation {few} in us-east-1b has 1 of 1 instances free" in e["reason"]
               for e in doc["excluded"]), doc["excluded"]
