"""Launching into an On-Demand Capacity Reservation the account holds, through the CLI against the sandbox: the plan
ranks it first, `--dry-run` shows one RunInstances on the On-Demand market targeting it from a subnet of its AZ, and
the launch runs the nodes in it (its available count drops to 0, and comes back once `down` ends them). The sandbox
holds a reservation as EC2 does: a targeted launch beyond its available count is refused with
ReservationCapacityExceeded, one in another AZ, of another type or on the Spot market is refused."""
from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from tests.support.capacity_reservations import REGION, reserve, write_spec
from tests.support.helpers import run_cli


def _cli(sandbox, tmp_path, *args: str):
    proc = run_cli(list(args), tmp_path / "home", env={**sandbox.env, "TRAINCTL_CACHE_TTL": "0"}, timeout=200)
    assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    return proc


def _available(sandbox, rid: str) -> int:
    (r,) = sandbox.client("ec2", REGION).describe_capacity_reservations(CapacityReservationIds=[rid])[
        "CapacityReservations"]
    return r["AvailableInstanceCount"]


def test_dry_run_shows_the_target_then_the_launch_runs_in_the_reservation(sandbox, tmp_path):
    rid, spec = reserve(sandbox), write_spec(tmp_path)
    doc = json.loads(_cli(sandbox, tmp_path, "-o", "json", "launch", spec, "--dry-run").stdout)
    (run,) = [r for r in doc["requests"] if r["operation"] == "RunInstances"]
    params = run["params"]
    assert params["CapacityReservationSpecification"] == {"CapacityReservationTarget": {"CapacityReservationId": rid}}
    assert "InstanceMarketOptions" not in params and params["MinCount"] == params["MaxCount"] == 2
    assert not [r for r in doc["requests"] if r["operation"] in ("CreateFleet", "CreatePlacementGroup")]
    subnet = sandbox.client("ec2", REGION).describe_subnets(SubnetIds=[params["SubnetId"]])["Subnets"][0]
    assert subnet["AvailabilityZone"] == "us-east-1b"

    job = json.loads(_cli(sandbox, tmp_path, "-o", "json", "launch", spec, "--yes").stdout)["job_id"]
    nodes = [i for r in sandbox.client("ec2", REGION).describe_instances(Filters=[
        {"Name": "tag:trainctl:job", "Values": [job]}, {"Name": "instance-state-name",
                                                        "Values": ["pending", "running"]}])["Reservations"]
             for i in r["Instances"]]
    assert len(nodes) == 2 and {n["Placement"]["AvailabilityZone"] for n in nodes} == {"us-east-1b"}
    assert all("InstanceLifecycle" not in n for n in nodes)   # On-Demand, not Spot
    assert _available(sandbox, rid) == 0
    _cli(sandbox, tmp_path, "down", job)
    assert _available(sandbox, rid) == 2


def _run(ec2, rid: str, subnet: str, itype: str = "g5.xlarge", count: int = 1, **extra):
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    return ec2.run_instances(ImageId=image, InstanceType=itype, MinCount=count, MaxCount=count, SubnetId=subnet,
                             CapacityReservationSpecification={"CapacityReservationTarget": {
                                 "CapacityReservationId": rid}}, **extra)


def test_the_sandbox_holds_a_reservation_as_ec2_does(sandbox):
    ec2 = sandbox.client("ec2", REGION)
    rid = reserve(sandbox, count=1)
    subnets = {s["AvailabilityZone"]: s["SubnetId"] for s in ec2.describe_subnets(Filters=[
        {"Name": "default-for-az", "Values": ["true"]}])["Subnets"]}
    for kwargs, code in (({"subnet": subnets["us-east-1b"], "count": 2}, "ReservationCapacityExceeded"),
                         ({"subnet": subnets["us-east-1a"]}, "InvalidParameterValue"),
                         ({"subnet": subnets["us-east-1b"], "itype": "g5.2xlarge"}, "InvalidParameterValue"),
                         ({"subnet": subnets["us-east-1b"], "InstanceMarketOptions": {"MarketType": "spot"}},
                          "InvalidParameterCombination")):
        with pytest.raises(ClientError) as refused:
            _run(ec2, rid, **kwargs)
        assert refused.value.response["Error"]["Code"] == code, kwargs
    assert _available(sandbox, rid) == 1
    _run(ec2, rid, subnets["us-east-1b"])
    assert _available(sandbox, rid) == 0


def test_failover_moves_on_when_the_reservation_was_taken_since_the_plan(sandbox, tmp_path):
    """The plan saw the reservation's 2 instances free; by the launch someone else runs one of them. The targeted
    RunInstances is refused (ReservationCapacityExceeded), the launch's cleanup removes what it made, and
    --failover moves to the plan's next option, as it does when Spot has no capacity."""
    rid, spec = reserve(sandbox), write_spec(tmp_path)
    plan = tmp_path / "plan.json"
    plan.write_text(_cli(sandbox, tmp_path, "-o", "json", "plan", spec).stdout)
    assert json.loads(plan.read_text())["options"][0]["capacity_reservation"]["reservation_id"] == rid
    ec2 = sandbox.client("ec2", REGION)
    subnet = next(s["SubnetId"] for s in ec2.describe_subnets(Filters=[
        {"Name": "default-for-az", "Values": ["true"]}])["Subnets"] if s["AvailabilityZone"] == "us-east-1b")
    _run(ec2, rid, subnet)  # another team's instance takes one of the two
    proc = _cli(sandbox, tmp_path, "-o", "json", "launch", spec, "--plan", str(plan), "--yes", "--failover")
    said = " ".join(proc.stderr.split())
    assert "got no capacity (ReservationCapacityExceeded" in said and "moving to" in said, proc.stderr
    job = json.loads(proc.stdout)["job_id"]
    nodes = [i for r in ec2.describe_instances(Filters=[
        {"Name": "tag:trainctl:job", "Values": [job]}, {"Name": "instance-state-name",
                                                        "Values": ["pending", "running"]}])["Reservations"]
             for i in r["Instances"]]
    assert len(nodes) == 2 and _available(sandbox, rid) == 1  # outside the reservation: its one free slot stays
    _cli(sandbox, tmp_path, "down", job)
