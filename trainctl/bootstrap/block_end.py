"""A node in an EC2 Capacity Block checkpoints and stops before the block ends, as on a Spot notice.

EC2 begins terminating a block's instances 30 minutes before the block's end and warns through EventBridge 40
minutes before it (EC2 User Guide, "Capacity Blocks for ML", "Monitor Capacity Blocks using EventBridge"); a node
sees neither on its IMDS spot/instance-action. So the launch writes the block's end into the node config
(`capacity_block_end`, epoch seconds) and this watcher acts at the warning's time: the same path as a Spot notice
(outcome.on_notice: the node is marked interrupted, the training is stopped with its grace, the checkpoints are
synced), so the job ends interrupted with its checkpoints in S3 and resumes on another option from them.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

RECLAIM_LEAD_S = 30 * 60   # EC2 terminates a block's instances from 30 minutes before its end
STOP_LEAD_S = 40 * 60      # acted on at EC2's own warning: 10 minutes for the stop's grace and the last sync


def stop_at(cfg: dict) -> float | None:
    """When the node must begin to checkpoint and stop (epoch seconds), or None outside a block."""
    end = cfg.get("capacity_block_end")
    return float(end) - float(cfg.get("capacity_block_stop_lead_s", STOP_LEAD_S)) if end else None


def watch(cfg: dict, finished: threading.Event, act: Callable[[str], None],
          clock: Callable[[], float] = time.time) -> None:
    """Wait until stop_at(cfg) (or the agent's end) and then `act(reason)` once."""
    at = stop_at(cfg)
    if at is None:
        return
    while not finished.is_set():
        left = at - clock()
        if left <= 0:
            end = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(float(cfg["capacity_block_end"])))
            act(f"the capacity block ends at {end}; EC2 terminates its instances from 30 minutes before")
            return
        finished.wait(min(left, 60.0))
