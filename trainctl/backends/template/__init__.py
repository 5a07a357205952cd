"""A new backend's starting point: copy this folder to `backends/<platform>/`, rename `TemplateBackend`, write each
function that raises `missing(...)`, and drop `.example` from its data files (`platform.toml`: the platform's facts;
`iam_calls.toml`: its own rows of the IAM table) once they say the new platform's; docs/adding-a-backend.md lists
every file and step. It is not in the registry (backends/__init__.py) and, its data files ending in `.example`, no
platform: nothing plans or launches through it, and tests/sandbox/backends/test_backend_contract.py checks that it
still has every method of the contract, each one saying what to write."""
from trainctl.backends.template.backend import TemplateBackend

__all__ = ["TemplateBackend"]
