"""trainctl's tests get the sandbox fixtures (`sandbox`, `sandbox_env`, `sm`) and the session-wide IAM
policy check from the sandbox's pytest plugin (sandbox/trainctl_sandbox/testing.py): install both
distributions first (`make install`)."""
pytest_plugins = ["trainctl_sandbox.testing"]

# Hypothesis: deterministic by default (the same examples on every run, no example database), so `make test` is
# green or red for the code, not for the draw; `make fuzz-wide` (TRAINCTL_FUZZ=wide) searches randomly and longer.
import os  # noqa: E402

from hypothesis import settings  # noqa: E402

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("wide", derandomize=False, database=None, print_blob=True)
settings.load_profile("wide" if os.environ.get("TRAINCTL_FUZZ") == "wide" else "ci")



import pytest  # noqa: E402


def pytest_collection_modifyitems(config, items):
    """`make test` runs two workers (`-n 2 --dist loadgroup`): the tests that train (tests/slow/, or marked slow)
    run one after another on one worker, since two trainings at once on a 2-core machine only slow each other,
    while the other worker takes the tests that mostly wait on the sandbox."""
    for item in items:
        if "tests/slow/" in item.nodeid or item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.xdist_group("training"))
