"""What DescribeTrainingJob reports about a sandbox SageMaker job (`JobState`), and the simulated
durations of its lifecycle (`Settings`)."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

from moto.core.utils import utcnow


@dataclass
class Settings:
    """Simulated durations in sandbox seconds; real seconds = value x time_scale.

    Defaults are short enough for a demo; tests use a smaller time_scale. User-given limits
    (MaxRuntimeInSeconds, MaxWaitTimeInSeconds, after_seconds) are never scaled.
    """

    time_scale: float = 1.0
    starting_s: float = 2.0          # instances launching (AWS: minutes)
    restart_wait_s: float = 4.0      # capacity wait after a Spot interruption
    stop_grace_s: float = 30.0       # SIGTERM -> SIGKILL (AWS: 120 s)
    sync_interval_s: float = 2.0     # checkpoint folder -> S3
    capacity_retry_s: float = 4.0    # how long an On-Demand job retries before CapacityError
    role_propagation_s: float = 0.0  # a younger execution role cannot be assumed yet (IAM's eventual consistency)
    disk_gb_bytes: float = 1e9       # bytes a GB of a host's storage holds (volumes.py: the disk scale)

    def real(self, name: str) -> float:
        return getattr(self, name) * self.time_scale


class Aborted(Exception):
    """The job was forgotten (reset/shutdown): stop at once, touch no AWS state."""


class JobState:
    """Status, transitions and times of one job; every field DescribeTrainingJob derives from."""

    def __init__(self, spot: bool, spot_fraction: Callable[[float, float], float] | None = None):
        self.lock = threading.RLock()
        self.spot = spot
        # Spot: the fraction of On-Demand a billed stretch (start, end) costs (billing.py); the stretches
        # are the instances' time up, from each attempt's start to its reclaim or the job's end.
        self.spot_fraction = spot_fraction
        self._billed: list[list[float | None]] = []
        now = utcnow()
        self.creation_time = now
        self.created_wall = time.time()
        self.last_modified_time = now
        self.status = "InProgress"
        self.secondary = "Starting"
        self.transitions: list[dict[str, Any]] = [
            {"Status": "Starting", "StartTime": now, "StatusMessage": "Launching requested ML instances"}
        ]
        self.failure_reason: str | None = None
        self.training_start_time = None
        self.training_end_time = None
        self._start_wall: float | None = None
        self._end_wall: float | None = None
        # Spot: instance time not billed (from reclaim after an interruption to the next
        # attempt's instances being ready); closed seconds plus the open segment's start.
        self._unbilled_s = 0.0
        self._unbilled_since: float | None = None
        self.interruptions = 0

    @property
    def ended(self) -> bool:
        with self.lock:
            return self.status in ("Completed", "Failed", "Stopped")

    def transition(self, status: str, message: str) -> None:
        with self.lock:
            now = utcnow()
            last = self.transitions[-1] if self.transitions else None
            if last is not None and last["Status"] == status and "EndTime" not in last:
                last["StatusMessage"] = message  # same secondary status, newer detail (as AWS does)
            else:
                if last is not None and "EndTime" not in last:
                    last["EndTime"] = now
                self.transitions.append({"Status": status, "StartTime": now, "StatusMessage": message})
            self.secondary = status
            self.last_modified_time = now

    def set_status(self, status: str) -> None:
        with self.lock:
            self.status = status
            self.last_modified_time = utcnow()

    def instances_ready(self) -> None:
        """An attempt's instances are up: billing (re)starts; the first time, training starts."""
        with self.lock:
            now = time.time()
            if self._start_wall is None:
                self._start_wall = now
                self.training_start_time = utcnow()
            if self._unbilled_since is not None:
                self._unbilled_s += now - self._unbilled_since
                self._unbilled_since = None
            self._billed.append([now, None])

    def _close_stretch(self, now: float) -> None:
        if self._billed and self._billed[-1][1] is None:
            self._billed[-1][1] = now

    def instances_reclaimed(self) -> None:
        with self.lock:
            self.interruptions += 1
            self._unbilled_since = time.time()
            self._close_stretch(self._unbilled_since)

    def running_seconds(self) -> float:
        """Billed time so far: what MaxRuntimeInSeconds limits."""
        with self.lock:
            if self._start_wall is None:
                return 0.0
            end = self._end_wall or time.time()
            open_gap = (end - self._unbilled_since) if self._unbilled_since is not None else 0.0
            return end - self._start_wall - self._unbilled_s - open_gap

    def finish(self, status: str, secondary: str, message: str, failure_reason: str | None = None) -> None:
        with self.lock:
            if self.ended:
                return
            if self._unbilled_since is not None:  # ended while waiting for capacity: not billed
                self._unbilled_s += time.time() - self._unbilled_since
                self._unbilled_since = None
            self.transition(secondary, message)
            self.transitions[-1]["EndTime"] = self.transitions[-1]["StartTime"]
            if failure_reason:
                self.failure_reason = failure_reason[:1024]
            if self._start_wall is not None:
                self._end_wall = time.time()
                self._close_stretch(self._end_wall)
                self.training_end_time = utcnow()
            self.status = status
            self.last_modified_time = utcnow()

    def times(self) -> dict[str, int]:
        """TrainingTimeInSeconds/BillableTimeInSeconds, once the job has ended (as AWS reports them)."""
        with self.lock:
            if self._start_wall is None or self._end_wall is None:
                return {}
            training = self._end_wall - self._start_wall
            # floor both: a >= 1 s unbilled gap always shows as Billable < Training; AWS bills >= 1 s
            training_s = max(int(training), 1)
            billed = training - self._unbilled_s
            if self.spot and self.spot_fraction is not None:
                billed = sum((end - start) * self.spot_fraction(start, end) for start, end in self._billed
                             if end is not None)
            billable_s = min(max(int(billed), 1), training_s) if self.spot else training_s
            return {"TrainingTimeInSeconds": training_s, "BillableTimeInSeconds": billable_s}
