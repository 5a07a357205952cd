"""A job waiting for its EC2 Capacity Block: bought, not started, so nothing of it runs on AWS yet. `launch` records
it with this status (usecases/launch/capacity_block.py); `ls` and `watch` say when the block starts instead of
asking AWS about a job it does not have."""
from __future__ import annotations

from datetime import datetime, timezone

WAITING = "WaitingForBlock"      # the job's recorded status while its bought block has not started


def waiting_words(option) -> str:
    b = option.capacity_block if option is not None else None
    if b is None:
        return "waiting for the block"
    start = datetime.fromisoformat(b.start)
    start = start.replace(tzinfo=timezone.utc) if start.tzinfo is None else start.astimezone(timezone.utc)
    return f"waiting for the block, starts {start:%Y-%m-%d %H:%M} UTC (reservation {b.reservation_id})"
