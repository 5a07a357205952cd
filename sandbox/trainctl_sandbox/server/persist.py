"""The sandbox's account across `sandbox down` and `sandbox up`: what a user made in it (buckets and objects, IAM
roles and policies with the boundary's versions, log groups, keys, secrets, topics, training jobs, EC2's VPCs,
instances, fleets, launch templates and placement groups) is saved when the server stops and restored when the next
one starts from the same state folder, as an AWS account keeps it. `sandbox up --fresh` starts a new account
instead; an admin reset (the tests) is always a new account.

moto's backends are plain objects: each service's per-account, per-region backend is pickled as it is; what an
extension keeps in the server's context (placement groups) is saved through its `kept_state(ctx)` and put back
through its `restore_state(ctx, data)`. A SageMaker job is saved as its last description (sagemaker/ended.py): its
runner's threads and processes end with the server. EC2 is restored once moto's EC2 is imported (the server's
warm-up), before its seed, which then adds only what the account lacks. An instance that ran when the server
stopped ended with it (ec2/restart.py: terminated, StateReason Server.InternalError, at the stop's time): its
processes and its disk, the node's folder, were the server's. A service that cannot be pickled is left out with
a line in the server's log, never a failed stop.
"""
from __future__ import annotations

import logging
import os
import pickle
from pathlib import Path

SAVED = "account.pickle"
SERVICES = ("s3", "iam", "logs", "kms", "secretsmanager", "sns", "sagemaker")
EC2_SERVICES = ("ec2",)  # restored after the warm-up has imported moto's EC2
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


def save(directory: Path, reducers=(), services=SERVICES, extensions: dict | None = None) -> list[str]:
    """Pickle the services' backends and the extensions' kept state into directory/account.pickle (atomically);
    the services saved. `extensions`: {extension module name: what its kept_state returned}."""
    import io

    from moto.backends import get_backend

    kept: dict[str, bytes] = {}
    for service in services:
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
    extras: dict[str, bytes] = {}
    for name, data in (extensions or {}).items():
        try:
            extras[name] = pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001
            _log.exception("sandbox: %s's state not saved", name)
    # what this server did not get to (EC2 before its warm-up ended) stays as the last server saved it
    before = _load(directory) or {"services": {}, "extensions": {}}
    kept = {**{s: b for s, b in before["services"].items() if s not in services}, **kept}
    extras = {**before["extensions"], **extras}
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{SAVED}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        pickle.dump({"services": kept, "extensions": extras}, f, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(directory / SAVED)
    return sorted(kept)


def _load(directory: Path) -> dict | None:
    path = directory / SAVED
    try:
        with open(path, "rb") as f:
            kept = pickle.load(f)
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - an unreadable file (another moto version): a new account, said in the log
        _log.exception("sandbox: %s unreadable; starting a new account", path)
        return None
    # a file from before extensions were kept: the services alone
    return kept if isinstance(kept.get("services"), dict) else {"services": kept, "extensions": {}}


def extension_state(directory: Path) -> dict:
    """{extension module name: what its kept_state returned} as saved; {} when nothing was."""
    found = {}
    for name, blob in ((_load(directory) or {}).get("extensions") or {}).items():
        try:
            found[name] = pickle.loads(blob)
        except Exception:  # noqa: BLE001
            _log.exception("sandbox: %s's state not restored", name)
    return found


def restore(directory: Path, services=SERVICES) -> dict[str, int] | None:
    """Put the saved backends of `services` in place of the seeded ones; {what: how many} restored, or None when
    nothing was saved (a new account)."""
    from moto.backends import get_backend

    kept = _load(directory)
    if kept is None:
        return None
    for service, blob in kept["services"].items():
        if service not in services:
            continue
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
