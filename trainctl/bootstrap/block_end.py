"""A node in an EC2 Capacity Block checkpoints and stops before the block ends, as on a Spot notice.

EC2 begins terminating a block's instances 30 minutes before the block's end and warns through EventBridge 40
minutes before it (EC2 User Guide, "Capacity Blocks for ML", "Monitor Capacity Blocks using EventBridge"); a node
sees neither on its IMDS spot/instance-action. So the launch writes the block's end into the node config
(`capacity_block_end`, epoch seconds) and this watcher acts at the warning's time: the same path as a Spot notice
(outcome.on_notice: the node is marked interrupted, the training is stopped with its grace, the checkpoints are
synced), so the job ends interrupted with its checkpoints in S3 and resumes on another option from them.

The end is read again from EC2 while the job runs (DescribeCapacityReservations of the block's reservation, every
READ_EVERY_S): a block's end can move after the launch (EC2 sells Capacity Block extensions,
PurchaseCapacityBlockExtension, which move its EndDate later), and a node that kept the launch-time end would stop
a job the extension paid for. A failed read keeps the end last known (never an earlier stop, never a missed one).
"""
from __future__ import annotations

import threading
import time
from typing import Callable

RECLAIM_LEAD_S = 30 * 60   # EC2 terminates a block's instances from 30 minutes before its end
STOP_LEAD_S = 40 * 60      # acted on at EC2's own warning: 10 minutes for the stop's grace and the last sync
READ_EVERY_S = 30.0        # one DescribeCapacityReservations per node per 30 s: far below EC2's request rates


def stop_at(cfg: dict, end: float | None = None) -> float | None:
    """When the node must begin to checkpoint and stop (epoch seconds), or None outside a block."""
    end = end if end is not None else cfg.get("capacity_block_end")
    return float(end) - float(cfg.get("capacity_block_stop_lead_s", STOP_LEAD_S)) if end else None


def reader(ec2, cfg: dict) -> Callable[[], float | None]:
    """The block's end as EC2 says it now (epoch seconds), None when it cannot be read."""
    rid = cfg.get("capacity_reservation_id")

    def read() -> float | None:
        if not rid:
            return None
        try:
            found = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"]
            return found[0]["EndDate"].timestamp() if found and found[0].get("EndDate") else None
        except Exception:  # noqa: BLE001 - a throttle or a network blip keeps the end last known
            return None
    return read


def watch(cfg: dict, finished: threading.Event, act: Callable[[str], None],
          clock: Callable[[], float] = time.time, read_end: Callable[[], float | None] | None = None) -> None:
    """Wait until the block's stop time (or the agent's end) and then `act(reason)` once; the end is read again
    every READ_EVERY_S with `read_end` (see the module's docstring)."""
    end = float(cfg["capacity_block_end"]) if cfg.get("capacity_block_end") else None
    if end is None:
        return
    while not finished.is_set():
        end = (read_end() if read_end else None) or end
        left = stop_at(cfg, end) - clock()
        if left <= 0:
            words = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(end))
            act(f"the capacity block ends at {words}; EC2 terminates its instances from 30 minutes before")
            return
        finished.wait(min(left, READ_EVERY_S if read_end else 60.0))
