"""A spec whose layout AWS sells as Capacity Blocks (p4d.24xlarge in us-west-2, ~19 h of work), and the sandbox
set so that a block wins: Spot's interruptions take the job past a 20.3 h deadline, On-Demand P capacity is refused
to the account (quota 0), and a block starts in an hour. Shared by the plan and launch tests."""
from __future__ import annotations

import yaml

P_ON_DEMAND = "L-417A185B"  # Running On-Demand P instances (vCPUs)
DEADLINE_H = 20.3


def write_spec(tmp_path, deadline_hours: float | None = None) -> str:
    spec = {"name": "block-test", "entrypoint": {"bundled": "ddp"},
            "model": {"architecture": "vit_micro", "precision": "fp32", "optimizer": "adam"},
            "workload": {"samples": 6_500_000_000, "batch_size_per_accelerator": 16},
            "candidates": {"layouts": ["p4d.24xlarge:1"], "platforms": ["ec2"], "regions": ["us-west-2"],
                           "markets": ["spot", "on-demand"]},
            "constraints": {"checkpoint_interval_minutes": 30, "max_spot_wait_hours": 1,
                            **({"deadline_hours": deadline_hours} if deadline_hours else {})}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def block_wins(sandbox, tmp_path, starts=(1, 15, 30)) -> str:
    """Set the sandbox so that a block is the plan's first option; the spec's path."""
    sandbox.admin.set_quota("ec2", P_ON_DEMAND, 0)
    sandbox.admin.action("set_capacity_blocks", start_in_hours=list(starts))
    return write_spec(tmp_path, deadline_hours=DEADLINE_H)


def sagemaker_spec(tmp_path, region: str = "us-west-2") -> str:
    """The same job as a SageMaker On-Demand layout (AWS sells ml.p4d.24xlarge as training plans)."""
    spec = yaml.safe_load(open(write_spec(tmp_path)))
    spec["candidates"].update(platforms=["sagemaker"], markets=["on-demand"], regions=[region])
    path = tmp_path / "sagemaker-plan.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)
