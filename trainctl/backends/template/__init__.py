"""A new backend's starting point: copy this folder to `backends/<platform>/`, rename `TemplateBackend`, and
write each function that raises `missing(...)`; docs/adding-a-backend.md lists every file and step. It is not in
the registry (backends/__init__.py): nothing launches through it, and tests/sandbox/backends/test_backend_contract.py
checks that it still has every method of the contract, each one saying what to write."""
from trainctl.backends.template.backend import TemplateBackend

__all__ = ["TemplateBackend"]
