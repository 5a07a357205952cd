"""What the pure layers know of each platform, as data: one `PlatformFacts` entry per backend.

The spec's `platforms:` names, a plan's `platform`, the planner's launch overheads and Spot recovery, the CLI's
`--platform` help and the IAM table's platforms all read this registry. It lives below every layer (catalog/)
because those readers run before, or without, any backend: `trainctl schema`, an offline plan, the sandbox's
seeded policy; the pure folders may not import `trainctl/backends/` (docs/architecture.md). A backend points at
its entry (`Backend.facts`, backends/base.py) and tests/sandbox/backends/test_backend_contract.py checks that
the backends' registry and this one name the same platforms in the same order.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlatformFacts:
    name: str                       # as the spec, plans, flags and records write it
    title: str                      # as sentences name it
    # minutes of one launch: (not billed, billed) before the first step (planner/spot/launch_overheads.py)
    start_minutes: tuple[float, float]
    # seconds between the Spot notice and the job hearing of it (planner/spot/risk.py)
    notice_poll_s: float
    # True where a Spot reclaim restarts the whole job on new capacity (SageMaker's managed Spot): no node is
    # billed while it waits, every node copies its data again, the job cannot shrink (elastic), and a
    # fallback to On-Demand moves the whole job. False where the lost nodes alone are replaced (EC2).
    restarts_whole_job: bool


# The order is the registry's order (backends/__init__.py BACKENDS): the schema's enum, the spec's default
# `platforms:` and the words that name the platforms follow it.
PLATFORMS: dict[str, PlatformFacts] = {f.name: f for f in (
    # - sagemaker: Starting (provisioning the instances) ~4 min (not billed); Downloading the ~10 GB PyTorch
    #   training image and the code, then the container's start ~5 min (billed). SageMaker SIGTERMs the
    #   container itself (assumed to give the same 120 s as a stop).
    PlatformFacts("sagemaker", "SageMaker", start_minutes=(4.0, 5.0), notice_poll_s=0.0, restarts_whole_job=True),
    # - ec2: CreateFleet to running ~1 min (not billed); boot of the Deep Learning AMI, the agent's code
    #   download, torchrun rendezvous ~4 min (billed). The node agent polls the instance metadata for the
    #   notice every 5 s (trainctl/bootstrap/agent.py, spot_poll_s).
    PlatformFacts("ec2", "EC2", start_minutes=(1.0, 4.0), notice_poll_s=5.0, restarts_whole_job=False),
)}
NAMES: tuple[str, ...] = tuple(PLATFORMS)


def facts(platform: str) -> PlatformFacts:
    """The entry of a platform the spec and plans already validated (a KeyError is a bug, not input)."""
    return PLATFORMS[platform]


def either(last: str = "or") -> str:
    """The platforms' names for a help text: 'sagemaker or ec2'."""
    return f" {last} ".join(NAMES) if len(NAMES) < 3 else f"{', '.join(NAMES[:-1])} {last} {NAMES[-1]}"


def every() -> str:
    """What a default of every platform is called in a help text: 'both' while there are two."""
    return "both" if len(NAMES) == 2 else "all"
