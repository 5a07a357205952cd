"""When the environment still points at a sandbox (or another endpoint) that no longer runs, every command says so
in one line with the way back, instead of botocore's EndpointConnectionError; `ls` says it once, above the jobs it
knows, not once per job in a six-line cell."""
from __future__ import annotations

import json
import socket

from tests.support.helpers import run_cli
from trainctl.plans import Option
from trainctl.state.job_store import JobStore


def _dead_endpoint() -> str:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _env(url: str, sandbox: bool = True) -> dict:
    env = {"AWS_ENDPOINT_URL": url, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "TRAINCTL_AWS_MAX_ATTEMPTS": "1", "COLUMNS": "80"}
    return {**env, "TRAINCTL_SANDBOX": "1"} if sandbox else env


def _record(home, url: str, job_id: str) -> None:
    option = Option(rank=1, platform="sagemaker", instance_type="g5.xlarge", count=1, market="spot",
                    region="us-east-1", accelerators=1, hourly_usd=0.5, throughput_samples_per_s=10,
                    throughput_source="model", hours=1.0, expected_cost_usd=0.5)
    with JobStore(home / "state.db", endpoint=url) as store:
        store.record_job(job_id=job_id, account="123456789012", platform="sagemaker", region="us-east-1",
                         spec_path="x.yaml", spec_name="x", model="m", batch_size=8, option=option, plan_json=None,
                         status="InProgress")


def test_a_command_against_a_stopped_sandbox_says_so_in_one_line(tmp_path):
    url = _dead_endpoint()
    proc = run_cli(["down", "some-job", "--platform", "sagemaker"], tmp_path, env=_env(url), timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"trainctl: error: the sandbox at {url} is not running: `trainctl sandbox up`"


def test_another_endpoint_that_does_not_answer_is_named_too(tmp_path):
    url = _dead_endpoint()
    proc = run_cli(["down", "some-job", "--platform", "sagemaker"], tmp_path, env=_env(url, sandbox=False), timeout=60)
    assert proc.returncode == 1 and "EndpointConnectionError" not in proc.stderr
    assert f"nothing answers at {url} (AWS_ENDPOINT_URL)" in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_ls_says_it_once_and_shows_the_recorded_status(tmp_path):
    url = _dead_endpoint()
    for n in range(3):
        _record(tmp_path, url, f"job-{n}")
    proc = run_cli(["ls"], tmp_path, env=_env(url), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines() == [f"trainctl: warning: the sandbox at {url} is not running: `trainctl "
                                                "sandbox up`; the statuses below are the last recorded ones"]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("│job-")]
    assert len(rows) == 3 and all("InProgress (recorded)" in r for r in rows)
    doc = json.loads(run_cli(["-o", "json", "ls"], tmp_path, env=_env(url), timeout=60).stdout)
    assert len(doc["warnings"]) == 1 and {j["status"] for j in doc["jobs"]} == {"InProgress (recorded)"}


def test_watch_against_a_stopped_sandbox_says_so_at_once(tmp_path):
    """Not after minutes of asking again (issue 35): nothing listens, and asking again would not start it."""
    url = _dead_endpoint()
    _record(tmp_path, url, "job-0")
    proc = run_cli(["watch", "job-0", "--interval", "0.05"], tmp_path, env=_env(url), timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 5 and "asking again" not in proc.stderr, proc.stderr
    assert lines[-1].endswith(f"the sandbox at {url} is not running: `trainctl sandbox up`"), proc.stderr
