"""trainctl's tests get the sandbox fixtures (`sandbox`, `sandbox_env`, `sm`) and the session-wide IAM
policy check from the sandbox's pytest plugin (sandbox/trainctl_sandbox/testing.py): install both
distributions first (`make install`)."""
pytest_plugins = ["trainctl_sandbox.testing"]
