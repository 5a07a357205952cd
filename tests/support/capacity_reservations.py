"""A small EC2 spec (2 x g5.xlarge in us-east-1, Spot or On-Demand) and the On-Demand Capacity Reservations a test
makes the account hold, as a user would (CreateCapacityReservation). Shared by the plan and launch tests."""
from __future__ import annotations

import yaml

REGION = "us-east-1"


def write_spec(tmp_path) -> str:
    spec = {"name": "odcr-test", "entrypoint": {"bundled": "ddp"},
            "model": {"architecture": "vit_micro", "precision": "fp32", "optimizer": "adam"},
            "workload": {"samples": 200_000_000, "batch_size_per_accelerator": 16},
            "candidates": {"layouts": ["g5.xlarge:2"], "platforms": ["ec2"], "regions": [REGION],
                           "markets": ["spot", "on-demand"]}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def reserve(sandbox, itype: str = "g5.xlarge", count: int = 2, az: str = "us-east-1b", **extra) -> str:
    """A reservation the account holds (targeted, Linux/UNIX, no end unless `extra` says): its id."""
    made = sandbox.client("ec2", REGION).create_capacity_reservation(
        InstanceType=itype, InstancePlatform=extra.pop("InstancePlatform", "Linux/UNIX"), AvailabilityZone=az,
        InstanceCount=count, InstanceMatchCriteria=extra.pop("InstanceMatchCriteria", "targeted"), **extra)
    return made["CapacityReservation"]["CapacityReservationId"]
