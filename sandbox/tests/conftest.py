"""The sandbox's tests use the same fixtures as trainctl's (`sandbox`, `sandbox_env`, `sm`): its pytest
plugin, trainctl_sandbox/testing.py."""
pytest_plugins = ["trainctl_sandbox.testing"]
