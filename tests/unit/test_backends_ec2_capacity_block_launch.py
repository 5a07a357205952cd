"""Launching into a bought Capacity Block (trainctl/backends/ec2/capacity_block_launch.py): one RunInstances of all
the nodes with the capacity-block market and the reservation targeted, in a subnet of the block's AZ (on each
network interface when the template has them: EC2 takes no request-level SubnetId beside them), and the block's
end in the node config."""
from __future__ import annotations

from trainctl.backends.base import AwsCall
from trainctl.backends.ec2.capacity_block_launch import node_config, run_params
from trainctl.backends.ec2.prepare import fleet_params
from trainctl.plans import CapacityBlockTerms

FLEET = fleet_params("job-1", "trainctl-job-1", "p4d.24xlarge", 2, "capacity-block", ["subnet-a", "subnet-b"], "tok")


def _template(nics: list[dict] | None) -> AwsCall:
    data = {"NetworkInterfaces": nics} if nics else {"SecurityGroupIds": ["sg-1"]}
    return AwsCall("ec2", "CreateLaunchTemplate", {"LaunchTemplateData": data}, "us-west-2")


def test_all_the_nodes_go_into_the_reservation_with_the_capacity_block_market():
    params = run_params("job-1", FLEET, _template(None), "cr-1")
    assert params["MinCount"] == params["MaxCount"] == 2 and params["SubnetId"] == "subnet-a"
    assert params["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert params["CapacityReservationSpecification"] == {"CapacityReservationTarget": {"CapacityReservationId": "cr-1"}}
    assert params["LaunchTemplate"] == {"LaunchTemplateName": "trainctl-job-1", "Version": "$Latest"}
    assert "Placement" not in params and params["ClientToken"] == "tok"
    assert {"Key": "trainctl:job", "Value": "job-1"} in params["TagSpecifications"][0]["Tags"]


def test_a_template_with_efa_interfaces_takes_the_subnet_on_each_interface():
    nics = [{"NetworkCardIndex": c, "DeviceIndex": 0 if c == 0 else 1, "InterfaceType": "efa", "Groups": ["sg-1"]}
            for c in range(4)]
    params = run_params("job-1", FLEET, _template(nics), "cr-1")
    assert "SubnetId" not in params and [n["SubnetId"] for n in params["NetworkInterfaces"]] == ["subnet-a"] * 4


def test_the_node_config_carries_the_block_s_end_only_inside_a_block():
    class Option:  # the two fields node_config reads
        capacity_block = None

    assert node_config(Option()) == {}
    Option.capacity_block = CapacityBlockTerms(
        offering_id="cb-1", availability_zone="us-west-2a", start="2027-01-14T08:00:00+00:00",
        end="2027-01-15T08:00:00+00:00", duration_hours=24, wait_hours=0, upfront_fee_usd=1, unused_hours=1)
    assert node_config(Option()) == {"capacity_block_end": 1_800_000_000, "capacity_reservation_id": None}
    Option.capacity_block = Option.capacity_block.model_copy(update={"reservation_id": "cr-1"})
    assert node_config(Option())["capacity_reservation_id"] == "cr-1"  # the agent reads the end again from it
