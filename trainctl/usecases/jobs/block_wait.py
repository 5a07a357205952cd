"""A job waiting for its EC2 Capacity Block: bought, not started, so nothing of it runs on AWS yet. `launch` records
it with this status (usecases/launch/capacity_block.py); `ls` and `watch` say when the block starts instead of
asking AWS about a job it does not have. A SageMaker job on a training plan that has not started is on AWS already,
Pending (SageMaker queues it): `ls` and `watch` say the same words of it."""
from __future__ import annotations

from datetime import datetime, timezone

WAITING = "WaitingForBlock"      # the job's recorded status while its bought block has not started


PENDING = "Pending"              # SageMaker's secondary status of a job waiting for its training plan to be Active


def waiting_words(option) -> str:
    b = option.capacity_block if option is not None else None
    from trainctl.planner.capacity_blocks import kind

    what = "the block" if option is None or kind(option.platform) == "capacity block" else "the training plan"
    if b is None:
        return f"waiting for {what}"
    start = datetime.fromisoformat(b.start)
    start = start.replace(tzinfo=timezone.utc) if start.tzinfo is None else start.astimezone(timezone.utc)
    held = "training plan" if what == "the training plan" else "reservation"
    return f"waiting for {what}, starts {start:%Y-%m-%d %H:%M} UTC ({held} {b.reservation_id})"


def still_waiting(option, secondary_status: str | None) -> bool:
    """A submitted job that waits for its reservation's start (SageMaker: Pending on a Scheduled training plan)."""
    return secondary_status == PENDING and option is not None and option.capacity_block is not None
