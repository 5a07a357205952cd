"""What a job does when Spot takes its nodes: the spec's constraints and its elastic bounds.

`constraints.on_spot_shortage` decides what happens when a reclaimed node cannot be replaced on Spot in time:
`wait` for Spot capacity (up to `max_spot_wait_hours`), fall back to `on-demand` capacity within the budget, or
`fail` the job. `elastic.min_nodes` lets the survivors keep training on fewer nodes while the replacement is
found (EC2 only: SageMaker cannot change a running job's size and restarts it whole instead).
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SpotShortage = Literal["wait", "on-demand", "fail"]
MAX_NODES = 64  # the same bound as spec.model.MAX_NODES (kept here so this module imports no sibling)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Constraints(_Strict):
    deadline_hours: float | None = Field(None, gt=0)
    budget_usd: float | None = Field(None, gt=0)
    # at least 6 s, at most a week: 1e-300 minutes overflowed the Spot rework arithmetic (lam value too large)
    checkpoint_interval_minutes: float = Field(30, ge=0.1, le=7 * 24 * 60)
    max_spot_wait_hours: float = Field(4, ge=0)
    restart_minutes: float = Field(10, ge=0, description="time to get back to training after an interruption")
    on_spot_shortage: SpotShortage = Field(
        "wait", description="when a lost Spot node cannot be replaced on Spot in time: wait (up to "
                            "max_spot_wait_hours), on-demand (replace it with On-Demand capacity, within the "
                            "budget and the deadline) or fail")


class Elastic(_Strict):
    """The sizes an EC2 job may train at. Without it a job keeps its fixed size (today's behaviour)."""
    min_nodes: int = Field(ge=1, le=MAX_NODES, description="the fewest nodes the job keeps training on while a "
                                                              "lost node is replaced (at most the layout's count)")
