"""Which AWS calls trainctl made: every request whose User-Agent carries `trainctl/` (aws.client() adds it)
is counted by service and operation, throttled attempts included.

The log outlives `reset` (it is the record of a whole test session); the admin action `call_log`
reads it (`{"clear": true}` also empties it). tests/sandbox/iam/test_iam_policy.py compares it with the IAM policy
trainctl generates, and the retry tests count attempts with it.
"""
from __future__ import annotations

import threading
from collections import Counter

MARKER = "trainctl/"
ACTION = "call_log"


class CallLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: Counter[tuple[str, str, str]] = Counter()
        self._in_flight = 0   # trainctl's requests being answered now (a test waits for 0 after interrupting)

    def record(self, user_agent: str, service: str, operation: str, region: str) -> None:
        if MARKER in user_agent:
            with self._lock:
                self._calls[(service, operation, region)] += 1
                self._in_flight += 1

    def done(self, user_agent: str) -> None:
        if MARKER in user_agent:
            with self._lock:
                self._in_flight -= 1

    def admin(self, payload: dict) -> dict:
        with self._lock:
            calls = [{"service": s, "operation": o, "region": r, "count": n}
                     for (s, o, r), n in sorted(self._calls.items())]
            in_flight = self._in_flight
            if payload.get("clear"):
                self._calls.clear()
        return {"calls": calls, "in_flight": in_flight}
