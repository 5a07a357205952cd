"""Market answers cached on disk, keyed by the endpoint and the account that gave them (TRAINCTL_CACHE_TTL seconds,
default 600), and the live account they are keyed by. Shared by the market fetch (market.py) and the placement
scores that launch and doctor read back from the plan (placement.py)."""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from trainctl.aws import clients as aws


def _home() -> Path:
    return Path(os.environ.get("TRAINCTL_HOME", Path.home() / ".trainctl"))


class DiskCache:
    """Answers on disk, keyed by the endpoint and the account that gave them: the sandbox's
    answers never serve a plan for AWS, and after the sandbox is gone nothing of it is read back, because
    the account is read live (GetCallerIdentity) before the cache is consulted."""

    def __init__(self, account: str, ttl_s: float | None = None, refresh: bool = False):
        self.ttl = float(os.environ.get("TRAINCTL_CACHE_TTL", "600")) if ttl_s is None else ttl_s
        self.dir = _home() / "cache"
        self.account = account
        self.refresh = refresh          # --refresh: ask AWS again (and keep the new answers)
        self.ages: dict[str, float] = {}  # op -> age in seconds of the oldest answer this run took from the cache

    def _path(self, key: dict) -> Path:
        ident = {"endpoint": aws.endpoint_url() or "aws", "account": self.account, **key}
        digest = hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:32]
        return self.dir / f"{digest}.json"

    def get(self, key: dict):
        if self.ttl <= 0 or self.refresh:
            return None
        p = self._path(key)
        try:
            age = time.time() - p.stat().st_mtime
            if age < self.ttl:
                value = json.loads(p.read_text())
                op = str(key.get("op"))
                self.ages[op] = max(age, self.ages.get(op, 0.0))
                return value
        except (OSError, ValueError):
            pass
        return None

    def put(self, key: dict, value) -> None:
        if self.ttl <= 0:
            return
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            p = self._path(key)
            tmp = p.with_suffix(".tmp")
            tmp.write_text(json.dumps(value))
            tmp.replace(p)
        except OSError:
            pass  # a cache that cannot be written is only slower


def caller_account(region: str | None = None) -> str:
    """The account the credentials belong to, asked live (never cached), with few attempts: an endpoint that
    does not answer (a sandbox since stopped) fails fast instead of being retried with backoff."""
    return aws.client("sts", region or aws.default_region(), max_attempts=2).get_caller_identity()["Account"]


def cached(cache: DiskCache, key: dict, fetch):
    """The cached answer to `key`, else `fetch()`'s, kept for the next asker."""
    hit = cache.get(key)
    if hit is not None:
        return hit
    value = fetch()
    cache.put(key, value)
    return value
