"""What every part of the sandbox server shares: where it listens, where it keeps files, the fault switches.

One `SandboxContext` exists per sandbox server process. The server (server.py) creates it, calls
`install(ctx)` of each extension module (EC2/pricing/quotas extensions, SageMaker job lifecycle),
routes admin actions to them and calls their `reset(ctx)` / `shutdown(ctx)`.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class FaultSwitches:
    """Faults a test (or a demo) turns on through the admin endpoint.

    capacity: (instance_type, availability_zone or None for every AZ) pairs that have no capacity.
    throttle: operation name (e.g. "GetSpotPlacementScores") -> how many more calls get throttled.
    latency_ms: operation name or "*" -> extra milliseconds added to each call.
    """

    capacity: set[tuple[str, str | None]] = field(default_factory=set)
    throttle: dict[str, int] = field(default_factory=dict)
    latency_ms: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def no_capacity(self, instance_type: str, availability_zone: str | None) -> bool:
        t = instance_type.removeprefix("ml.")
        with self.lock:
            return (t, None) in self.capacity or (t, availability_zone) in self.capacity

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


@dataclass
class SandboxContext:
    endpoint_url: str            # e.g. "http://127.0.0.1:5123"
    workdir: Path                # private folder of this server; SageMaker jobs live under workdir / "sagemaker"
    seed: int = 0                # seeds the market model (placement scores, Spot prices)
    account_id: str = "123456789012"
    regions: tuple[str, ...] = ("us-east-1", "us-west-2")
    faults: FaultSwitches = field(default_factory=FaultSwitches)
