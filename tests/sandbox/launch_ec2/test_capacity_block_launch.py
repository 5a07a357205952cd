"""Launching on an EC2 Capacity Block option never buys it implicitly: `--yes` alone (the plan's first option is
the block) stops before any AWS call that creates or buys anything, says the fee, the dates and that the purchase
cannot be undone, and names the option to launch instead; the sandbox has sold nothing. Through the CLI. And the
sandbox holds a bought block for its buyer only inside its window, AZ and size, as EC2 does."""
from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from tests.support.capacity_blocks import block_wins
from tests.support.helpers import run_cli

CHANGES = ("PurchaseCapacityBlock", "CreateFleet", "RunInstances", "CreateLaunchTemplate", "CreateBucket",
           "CreateRole", "PutObject")


def test_yes_alone_buys_no_block_and_launches_nothing(sandbox, tmp_path):
    spec = block_wins(sandbox, tmp_path)
    sandbox.admin.call_log(clear=True)
    proc = run_cli(["launch", spec, "--yes", "--failover"], tmp_path / "home",
                   env={**sandbox.env, "TRAINCTL_CACHE_TTL": "0"})
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    err = " ".join(proc.stderr.split())
    assert "nothing bought" in err and "cannot be undone" in err and "--yes never buys it" in err
    assert "paid up front whether used or not" in err and "us-west-2" in err
    assert "launch option 2 (1 x p4d.24xlarge on-demand on ec2) with --option 2" in err
    assert sandbox.admin.action("capacity_blocks")["bought"] == {}
    made = {c["operation"] for c in sandbox.admin.call_log()}
    assert not made & set(CHANGES), made


def test_the_sandbox_holds_a_bought_block_for_its_buyer_between_start_and_end(sandbox):
    region = "us-west-2"
    ec2 = sandbox.client("ec2", region)
    sandbox.admin.action("set_capacity_blocks", start_in_hours=[0, 5])
    now, later = ec2.describe_capacity_block_offerings(InstanceType="p4d.24xlarge", InstanceCount=2,
                                                       CapacityDurationHours=24)["CapacityBlockOfferings"]
    bought = [ec2.purchase_capacity_block(CapacityBlockOfferingId=o["CapacityBlockOfferingId"],
                                          InstancePlatform="Linux/UNIX")["CapacityReservation"] for o in (now, later)]
    assert [b["State"] for b in bought] == ["active", "scheduled"]
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    subnets = {s["AvailabilityZone"]: s["SubnetId"] for s in ec2.describe_subnets()["Subnets"]}

    def run(reservation: dict, count: int, az: str | None = None, market: str | None = "capacity-block"):
        return ec2.run_instances(
            ImageId=image, InstanceType="p4d.24xlarge", MinCount=count, MaxCount=count,
            SubnetId=subnets[az or reservation["AvailabilityZone"]],
            **({"InstanceMarketOptions": {"MarketType": market}} if market else {}),
            CapacityReservationSpecification={"CapacityReservationTarget": {
                "CapacityReservationId": reservation["CapacityReservationId"]}})

    def refused(code: str, *args, **kwargs) -> None:
        with pytest.raises(ClientError) as err:
            run(*args, **kwargs)
        assert err.value.response["Error"]["Code"] == code, err.value.response

    refused("InvalidParameterValue", bought[1], 1)                      # before its start
    other_az = next(az for az in subnets if az != bought[0]["AvailabilityZone"])
    refused("InvalidParameterValue", bought[0], 1, az=other_az)         # outside its AZ
    refused("InvalidParameterCombination", bought[0], 1, market=None)   # not the capacity-block market
    refused("InsufficientInstanceCapacity", bought[0], 3)              # more than it holds
    assert len(run(bought[0], 2)["Instances"]) == 2                     # what it holds, inside its window
    refused("InsufficientInstanceCapacity", bought[0], 1)              # and no more


def test_a_terminated_instance_gives_its_place_back_and_the_block_s_end_terminates_the_rest(sandbox):
    region = "us-west-2"
    ec2 = sandbox.client("ec2", region)
    sandbox.admin.action("set_capacity_blocks", start_in_hours=[0])
    (offer,) = ec2.describe_capacity_block_offerings(InstanceType="p4d.24xlarge", InstanceCount=2,
                                                     CapacityDurationHours=24)["CapacityBlockOfferings"]
    block = ec2.purchase_capacity_block(CapacityBlockOfferingId=offer["CapacityBlockOfferingId"],
                                        InstancePlatform="Linux/UNIX")["CapacityReservation"]
    rid = block["CapacityReservationId"]
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    subnet = next(s["SubnetId"] for s in ec2.describe_subnets()["Subnets"]
                  if s["AvailabilityZone"] == block["AvailabilityZone"])

    def run(count: int) -> list[str]:
        out = ec2.run_instances(ImageId=image, InstanceType="p4d.24xlarge", MinCount=count, MaxCount=count,
                                SubnetId=subnet, InstanceMarketOptions={"MarketType": "capacity-block"},
                                CapacityReservationSpecification={"CapacityReservationTarget": {
                                    "CapacityReservationId": rid}})
        return [i["InstanceId"] for i in out["Instances"]]

    def available() -> int:
        (r,) = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"]
        return r["AvailableInstanceCount"]

    first = run(2)
    assert available() == 0
    ec2.terminate_instances(InstanceIds=first[:1])
    assert available() == 1 and len(run(1)) == 1                         # its place came back
    ended = sandbox.admin.action("end_capacity_block", reservation_id=rid)["terminated"]
    assert len(ended) == 2
    states = {i["State"]["Name"] for r in ec2.describe_instances(InstanceIds=ended)["Reservations"]
              for i in r["Instances"]}
    assert states == {"terminated"}
    (r,) = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"]
    assert r["State"] == "expired"
    with pytest.raises(ClientError) as err:
        run(1)
    assert err.value.response["Error"]["Code"] == "InvalidParameterValue"   # not active any more
