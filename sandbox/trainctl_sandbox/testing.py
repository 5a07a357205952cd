"""The sandbox's pytest plugin: one sandbox server per test session, reset before every test that uses it.

trainctl's tests (tests/) and the sandbox's own (sandbox/tests/) load it from their conftest.py with
`pytest_plugins = ["trainctl_sandbox.testing"]`; pytest registers it once, so both folders share one
server in a run. The fixtures: `sandbox`, `sandbox_env`, `sm` (and the session's `sandbox_server`).

The server runs as a subprocess, as users meet it (`trainctl sandbox up --detach`), on a free
port, with its state files in a temporary TRAINCTL_HOME. It watches pytest's pid and stops by
itself if pytest dies; at the end of the session it is stopped with everything it started.

    def test_x(sandbox):                 # a clean, freshly seeded sandbox
        ec2 = sandbox.client("ec2")      # boto3 over HTTP, fake credentials, standard retries
        sandbox.admin.throttle("RunInstances", 2)

    def test_y(sandbox_env):             # the same, with AWS_* pointing at it in os.environ
        ...
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from trainctl_sandbox import process
from trainctl_sandbox.admin import SandboxAdmin


@dataclass
class Sandbox:
    endpoint_url: str
    env: dict[str, str]
    admin: SandboxAdmin
    state_dir: Path
    pid: int
    _clients: dict = field(default_factory=dict, repr=False)

    def client(self, service: str, region: str = process.DEFAULT_REGION, **config: Any):
        """A boto3 client of the sandbox (standard retry mode unless `retries` says otherwise)."""
        import boto3
        from botocore.config import Config

        key = (service, region, repr(sorted(config.items())))
        if key not in self._clients:
            cfg = Config(retries=config.pop("retries", {"mode": "standard"}), **config)
            self._clients[key] = boto3.session.Session().client(
                service, region_name=region, endpoint_url=self.endpoint_url, config=cfg,
                aws_access_key_id=process.FAKE_ACCESS_KEY, aws_secret_access_key=process.FAKE_SECRET_KEY)
        return self._clients[key]


@pytest.fixture(scope="session")
def sandbox_server(tmp_path_factory) -> Sandbox:
    directory = tmp_path_factory.mktemp("trainctl-home") / "sandbox"
    state = process.start_detached(port=0, seed=0, directory=directory, parent_pid=os.getpid(), wait_ec2=True)
    sb = Sandbox(endpoint_url=state["endpoint_url"], env=process.sandbox_env(state["endpoint_url"]),
                 admin=SandboxAdmin(state["endpoint_url"]), state_dir=directory, pid=state["pid"])
    try:
        yield sb
    finally:
        _read_call_log(sb)
        process.stop(directory)


@pytest.fixture
def sandbox(sandbox_server: Sandbox) -> Sandbox:
    """The session's sandbox, reset (moto state, extensions, faults, quotas) and seeded again."""
    sandbox_server.admin.reset()
    return sandbox_server


@pytest.fixture
def sandbox_env(sandbox: Sandbox, monkeypatch, tmp_path) -> Sandbox:
    """The sandbox, with the environment pointing boto3, the AWS CLI and trainctl at it.

    Every AWS_* variable of the developer's shell is removed first (a profile, a session token or a
    per-service endpoint would otherwise leak into the test), config files are pointed at nothing,
    and TRAINCTL_HOME is a fresh folder."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("TRAINCTL_HOME", str(tmp_path / "trainctl-home"))
    for name, value in sandbox.env.items():
        monkeypatch.setenv(name, value)
    return sandbox


# ------------------------------------------------------------------ session-wide IAM policy check
# The sandbox counts every call whose User-Agent carries trainctl/ (sandbox/trainctl_sandbox/call_log.py). When
# the session's sandbox stops, its log is read; at the end of the session any call that the policy of
# trainctl/iam.py does not cover fails the run (tests/test_iam_policy.py checks the other direction).
_SESSION_CALLS: set[str] = set()


def _read_call_log(sb: Sandbox) -> None:
    try:
        _SESSION_CALLS.update(f"{c['service']}:{c['operation']}" for c in sb.admin.call_log())
    except Exception as e:  # noqa: BLE001 - a sandbox that died is reported by its own tests
        print(f"\ncould not read the sandbox's call log: {e}")


def _uncovered() -> list[str]:
    from trainctl.iam import CALLS

    return sorted(_SESSION_CALLS - {c.operation for c in CALLS})


def pytest_sessionfinish(session, exitstatus):
    if _SESSION_CALLS and _uncovered() and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _SESSION_CALLS:
        return
    missing = _uncovered()
    if missing:
        terminalreporter.write_line(f"IAM policy check FAILED: trainctl made calls that trainctl/iam.py does not "
                                    f"allow: {', '.join(missing)}", red=True)
    else:
        terminalreporter.write_line(f"IAM policy check: all {len(_SESSION_CALLS)} kinds of AWS call trainctl made "
                                    "in this session are allowed by `trainctl iam-policy`")


@pytest.fixture
def sm(sandbox: Sandbox):
    """The sandbox with SageMaker's simulated waits (capacity retries, restarts) at x0.3, so launch tests stay
    short; the previous scale is put back afterwards."""
    before = sandbox.admin.action("configure_training_jobs")
    sandbox.admin.action("configure_training_jobs", time_scale=0.3)
    yield sandbox
    sandbox.admin.action("configure_training_jobs", time_scale=before["time_scale"])
