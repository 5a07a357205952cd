"""What every part of the sandbox server shares: where it listens, where it keeps files, the fault switches.

One `SandboxContext` exists per sandbox server process. The server (main.py) creates it, calls
`install(ctx)` of each extension module (EC2/pricing/quotas extensions, SageMaker job lifecycle),
routes admin actions to them and calls their `reset(ctx)` / `shutdown(ctx)`.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Where the sandbox serves each instance's metadata service (what 169.254.169.254 is inside an EC2 instance): the
# server routes the prefix, the extension that owns it answers (ec2/imds.py, through its PATHS).
IMDS_PREFIX = "/_trainctl/imds/"


class AdminError(Exception):
    """An admin request that cannot be carried out: answered 400 (404 for an unknown action). It lives here, below
    the extensions that raise it, so that they need not import the middleware that answers it."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass
class FaultSwitches:
    """Faults a test (or a demo) turns on through the admin endpoint.

    capacity: (instance_type, availability_zone or None for every AZ) pairs that have no capacity.
    throttle: operation name (e.g. "GetSpotPlacementScores") -> how many more calls get throttled.
    latency_ms: operation name or "*" -> extra milliseconds added to each call.
    capacity_limit: (instance_type, availability_zone or None) -> how many more instances that pool
        can launch; launches draw it down, and at 0 the pool counts as having no capacity. It is how a
        test gets a partial fleet (ask for 4, get 2).
    """

    capacity: set[tuple[str, str | None]] = field(default_factory=set)
    throttle: dict[str, int] = field(default_factory=dict)
    latency_ms: dict[str, float] = field(default_factory=dict)
    capacity_limit: dict[tuple[str, str | None], int] = field(default_factory=dict)
    # (bucket, key) whose next If-Match PutObject finds the object deleted by another writer first
    deleted_before_write: set[tuple[str, str]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _pool_keys(self, instance_type: str, availability_zone: str | None) -> list[tuple[str, str | None]]:
        t = instance_type.removeprefix("ml.")
        return [(t, None), (t, availability_zone)]

    def _no_capacity_locked(self, keys: list[tuple[str, str | None]]) -> bool:
        return any(k in self.capacity or self.capacity_limit.get(k, 1) <= 0 for k in keys)

    def no_capacity(self, instance_type: str, availability_zone: str | None) -> bool:
        keys = self._pool_keys(instance_type, availability_zone)
        with self.lock:
            return self._no_capacity_locked(keys)

    def limit(self, instance_type: str, availability_zone: str | None) -> int | None:
        """How many more instances the pool may launch, when a limit is set on it (None = unlimited)."""
        keys = self._pool_keys(instance_type, availability_zone)
        with self.lock:
            limits = [self.capacity_limit[k] for k in keys if k in self.capacity_limit]
        return min(limits) if limits else None

    def set_capacity(self, instance_type: str, availability_zone: str | None, available: bool | int) -> None:
        """available: False = none at all, True = unlimited (the default), an int = that many more instances."""
        key = (instance_type.removeprefix("ml."), availability_zone)
        with self.lock:
            self.capacity.discard(key)
            self.capacity_limit.pop(key, None)
            if available is False:
                self.capacity.add(key)
            elif available is not True:
                self.capacity_limit[key] = max(0, int(available))

    def take_capacity(self, instance_type: str, availability_zone: str | None, wanted: int, minimum: int = 1) -> int:
        """Launch up to `wanted` instances from the pool: how many it grants (0 when fewer than `minimum` are left).

        Granted instances are drawn from every limit that covers the pool, atomically, so concurrent
        launches cannot both take the last instance."""
        keys = self._pool_keys(instance_type, availability_zone)
        with self.lock:
            if self._no_capacity_locked(keys):
                return 0
            limits = [self.capacity_limit[k] for k in keys if k in self.capacity_limit]
            granted = min([wanted, *limits])
            if granted < minimum:
                return 0
            for k in keys:
                if k in self.capacity_limit:
                    self.capacity_limit[k] -= granted
            return granted

    def take_throttle(self, operation: str) -> bool:
        """True (and one fewer left) when this call of `operation` must be throttled."""
        with self.lock:
            left = self.throttle.get(operation, 0)
            if left <= 0:
                return False
            self.throttle[operation] = left - 1
            return True

    def added_latency_s(self, operation: str) -> float:
        with self.lock:
            return (self.latency_ms.get(operation, 0.0) + self.latency_ms.get("*", 0.0)) / 1000.0

    def clear(self) -> None:
        with self.lock:
            self.capacity.clear()
            self.throttle.clear()
            self.latency_ms.clear()
            self.capacity_limit.clear()
            self.deleted_before_write.clear()

    def take_deleted_before_write(self, bucket: str, key: str) -> bool:
        """True (once) when this conditional write of bucket/key must find the object deleted meanwhile."""
        with self.lock:
            if (bucket, key) not in self.deleted_before_write:
                return False
            self.deleted_before_write.discard((bucket, key))
            return True

    def snapshot(self) -> dict:
        """The switches as JSON-able data (for the admin `info` action)."""
        with self.lock:
            return {"capacity": sorted(([t, az] for t, az in self.capacity), key=str),
                    "capacity_limit": [[t, az, n] for (t, az), n in sorted(self.capacity_limit.items(), key=str)],
                    "throttle": dict(self.throttle), "latency_ms": dict(self.latency_ms),
                    "deleted_before_write": sorted(list(k) for k in self.deleted_before_write)}


@dataclass
class SandboxContext:
    endpoint_url: str            # e.g. "http://127.0.0.1:5123"
    workdir: Path                # private folder of this server; SageMaker jobs live under workdir / "sagemaker"
    seed: int = 0                # seeds the market model (placement scores, Spot prices)
    account_id: str = "123456789012"
    regions: tuple[str, ...] = ("us-east-1", "us-west-2")
    faults: FaultSwitches = field(default_factory=FaultSwitches)
    # Extension-owned state, by extension name (e.g. placement groups, ClientTokens seen). Kept here,
    # not in module globals, so that an admin reset has one place to clear.
    state: dict[str, Any] = field(default_factory=dict)
