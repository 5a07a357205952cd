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



import signal  # noqa: E402

# The tests press Ctrl-C the way a user does: SIGINT to a trainctl process. A run started as a background job of a
# non-interactive shell (`cmd &` in a script) inherits SIGINT ignored, and an ignored signal stays ignored across
# exec, so every process the tests start would shrug the keypress off. A handler (not SIG_IGN) here means each
# child starts with the default again, as under a terminal or CI.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import pytest  # noqa: E402


@pytest.fixture
def launched(sandbox_env, tmp_path):
    """An EC2 job of 2 Spot g5.12xlarge nodes launched by trainctl's backend in the sandbox: (the sandbox, the
    backend, what submit returned). The watch, stop and down tests and the sandbox's `interrupt` start from it."""
    from tests.support.ec2_jobs import SPEC, option
    from trainctl.aws import clients as aws
    from trainctl.backends.base import LaunchSettings
    from trainctl.backends.ec2 import Ec2Backend
    from trainctl.backends.options import Ec2Options
    from trainctl.spec import load_spec

    aws.reset_session()
    path = tmp_path / "job.yaml"
    path.write_text(SPEC)
    backend = Ec2Backend()
    request = backend.prepare(option("g5.12xlarge", 2, "spot", "us-east-1a"), load_spec(path),
                              LaunchSettings(job_id="job-1", spec_path=str(path), options=Ec2Options()))
    out = backend.submit(request)
    yield sandbox_env, backend, out
    aws.reset_session()


# No test joins an xdist group: `make test` (`-n 3 --dist loadgroup`) hands tests out one by one as workers free
# up. Training queues declared here once never took effect (xdist's worker reads the groups before this file's
# hook adds them), and made real they would put the sandbox's training jobs, about 1,500 s of them, on one worker:
# the whole run's critical path.


# A tier's marks come from its folder, never from a hand in the test file: every test under tests/slow/ (real
# torchrun, or a sandbox training job) is `slow`, so deselecting that mark leaves exactly the other tiers.
FOLDER_MARKS = {"tests/slow/": "slow"}


# Longest first: `make test` hands tests to 3 workers in this order, so the tiers whose tests wait minutes (real
# torchrun and training jobs, then the sandbox's launches) start at once and the second-long tiers fill in behind
# them; collected by folder name, the slow tier started two thirds of the way in and its longest tests (about
# 290 s) set the run's tail. The order within a tier is the collection's.
FOLDER_ORDER = ("tests/slow/", "tests/sandbox/", "sandbox/tests/")


def _tier(item) -> int:
    path = item.nodeid.split("::")[0]
    return next((i for i, folder in enumerate(FOLDER_ORDER) if path.startswith(folder)), len(FOLDER_ORDER))


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = item.nodeid.split("::")[0]
        for folder, mark in FOLDER_MARKS.items():
            if path.startswith(folder):
                item.add_marker(getattr(pytest.mark, mark))
    items.sort(key=_tier)   # stable: the same order on every worker, as xdist requires
