"""Launch backends by platform name. Imported lazily: `trainctl --help` must not pull in boto3."""
from __future__ import annotations

import importlib

from trainctl.errors import UsageError

# platform -> "module:Class"
BACKENDS: dict[str, str] = {
    "sagemaker": "trainctl.backends.sagemaker:SageMakerBackend",
    "ec2": "trainctl.backends.ec2:Ec2Backend",
}


def get_backend(platform: str, client_for=None):
    target = BACKENDS.get(platform)
    if target is None:
        raise UsageError(f"platform {platform!r} has no launch backend yet; use one of: {', '.join(sorted(BACKENDS))}")
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)(client_for)
