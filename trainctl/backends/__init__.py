"""Launch backends by platform name: the registry. Imported lazily: `trainctl --help` must not pull in boto3.

A new backend is one line here and its own folder, whose `platform.toml` the layers below read as its facts (the
same names in the same order; docs/adding-a-backend.md); no use case names a platform:
they ask the registry (`get_backend`, `backend_class`, `platforms`) and the contract (backends/base.py)."""
from __future__ import annotations

import importlib

from trainctl.errors import UsageError

# platform -> "module:Class"; the order is the order `doctor` checks the platforms in and the order flags name
# them ("use sagemaker or ec2")
BACKENDS: dict[str, str] = {
    "sagemaker": "trainctl.backends.sagemaker:SageMakerBackend",
    "ec2": "trainctl.backends.ec2:Ec2Backend",
}


def platforms() -> tuple[str, ...]:
    return tuple(BACKENDS)


def check_platform(platform: str | None, flag: str = "--platform") -> str | None:
    """`platform` as given (None: not given), or one line naming the platforms there are."""
    if platform is not None and platform not in BACKENDS:
        raise UsageError(f"{flag} {platform!r}: use {' or '.join(BACKENDS)}")
    return platform


def backend_class(platform: str) -> type:
    """The backend's class, for what it declares without AWS clients (capabilities, output layout, launch units)."""
    target = BACKENDS.get(platform)
    if target is None:
        raise UsageError(f"platform {platform!r} has no launch backend yet; use one of: {', '.join(sorted(BACKENDS))}")
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)


def get_backend(platform: str, client_for=None):
    return backend_class(platform)(client_for)


def all_backends(client_for=None) -> list:
    """One instance of every backend, in the registry's order."""
    return [get_backend(p, client_for) for p in BACKENDS]
