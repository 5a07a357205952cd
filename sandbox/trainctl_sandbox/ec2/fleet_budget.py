"""A fleet market's MaxTotalPrice, as CreateFleet spends it while it plans the launches."""
from __future__ import annotations

import math
from typing import Any, Callable

UNLIMITED = 1 << 30


class Budget:
    """A market's MaxTotalPrice: EC2 "will launch instances until it reaches the maximum amount that you're
    willing to pay ... even if it hasn't met the target capacity" (TargetCapacitySpecificationRequest)."""

    def __init__(self, cap_usd: float | None, price_of: Callable[[Any], float] | None):
        self.cap, self.price_of, self.spent = cap_usd, price_of, 0.0

    def affordable(self, pool: Any) -> int:
        if self.cap is None:
            return UNLIMITED
        price = self.price_of(pool)
        return UNLIMITED if price <= 0 else max(0, math.floor((self.cap - self.spent) / price + 1e-9))

    def spend(self, pool: Any, n: int) -> None:
        if self.cap is not None:
            self.spent += n * self.price_of(pool)
