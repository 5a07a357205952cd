"""The sandbox's account across `sandbox down` and `sandbox up`: what a user made in it (buckets and objects, IAM
roles and policies with the boundary's versions, log groups, keys, secrets, topics, training jobs) is saved when
the server stops and restored when the next one starts from the same state folder, as an AWS account keeps it.
`sandbox up --fresh` starts a new account instead; an admin reset (the tests) is always a new account.

moto's backends are plain objects: each service's per-account, per-region backend is pickled as it is. A SageMaker
job is saved as its last description (sagemaker/ended.py): its runner's threads and processes end with the server.
EC2 is not kept: its instances are local processes that end with the server, and its VPCs are seeded again;
an EC2 job's outcome lives in S3 (the nodes' status markers), which is kept. A service that cannot be pickled is
left out with a line in the server's log, never a failed stop.
"""
from __future__ import annotations

import logging
import os
import pickle
from pathlib import Path

SAVED = "account.pickle"
SERVICES = ("s3", "iam", "logs", "kms", "secretsmanager", "sns", "sagemaker")
_log = logging.getLogger(__name__)


class _Pickler(pickle.Pickler):
    """Pickles the backends; an object an extension cannot keep as it is (a running SageMaker job: its threads
    cannot be pickled, nor outlive the server) is saved as what that extension's `saved_as(obj)` returns."""

    def __init__(self, file, reducers, **kwargs):
        super().__init__(file, **kwargs)
        self.reducers = reducers

    def reducer_override(self, obj):
        for reduce in self.reducers:
            reduced = reduce(obj)
            if reduced is not None:
                return reduced
        return NotImplemented


def save(directory: Path, reducers=()) -> list[str]:
    """Pickle the kept services' backends into directory/account.pickle (atomically); the services saved."""
    import io

    from moto.backends import get_backend

    kept: dict[str, dict] = {}
    for service in SERVICES:
        for attempt in range(3):  # a job's runner thread may still be writing (its output): then again
            try:
                backends = {account: dict(regions) for account, regions in get_backend(service).items()}
                buffer = io.BytesIO()
                _Pickler(buffer, list(reducers), protocol=pickle.HIGHEST_PROTOCOL).dump(backends)
                kept[service] = buffer.getvalue()
                break
            except Exception:  # noqa: BLE001 - the others are still worth keeping
                if attempt == 2:
                    _log.exception("sandbox: %s not saved", service)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{SAVED}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        pickle.dump(kept, f, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(directory / SAVED)
    return sorted(kept)


def restore(directory: Path) -> dict[str, int] | None:
    """Put the saved backends in place of the seeded ones; {what: how many} restored, or None when nothing was
    saved (a new account)."""
    from moto.backends import get_backend

    path = directory / SAVED
    try:
        with open(path, "rb") as f:
            kept = pickle.load(f)
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - an unreadable file (another moto version): a new account, said in the log
        _log.exception("sandbox: %s unreadable; starting a new account", path)
        return None
    for service, blob in kept.items():
        try:
            backends = pickle.loads(blob)
        except Exception:  # noqa: BLE001
            _log.exception("sandbox: %s not restored", service)
            continue
        live = get_backend(service)
        for account, regions in backends.items():
            holder = live[account]          # creates the account's holder (and registers it for resets)
            dict.clear(holder)
            for region, backend in regions.items():
                dict.__setitem__(holder, region, backend)
    return summary()


def summary() -> dict[str, int]:
    from moto.backends import get_backend

    def count(service: str, attr: str) -> int:
        return sum(len(getattr(b, attr, {}) or {}) for regions in get_backend(service).values()
                   for b in regions.values())

    return {"buckets": count("s3", "buckets"), "roles": count("iam", "roles"),
            "training jobs": count("sagemaker", "training_jobs")}


def forget(directory: Path) -> bool:
    """`sandbox up --fresh`: the saved account is removed; whether there was one."""
    try:
        (directory / SAVED).unlink()
        return True
    except FileNotFoundError:
        return False
