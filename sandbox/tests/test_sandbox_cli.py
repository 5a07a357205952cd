"""`trainctl sandbox up --detach` / `status` / `down` as a user runs them (subprocesses, through the
plugin's entry point), and process clean-up."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import boto3

from trainctl_sandbox import cli
from trainctl_sandbox.server import process

ENV_NAMES = {"AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "TRAINCTL_SANDBOX"}


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRAINCTL_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "trainctl.cli", "sandbox", *args], env=env, capture_output=True,
                          text=True, timeout=120)


def _exports(stdout: str) -> dict[str, str]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert all(line.startswith("export ") for line in lines), stdout
    return dict(line.removeprefix("export ").split("=", 1) for line in lines)


def test_up_detach_status_down(tmp_path, monkeypatch):
    state_dir = tmp_path / "sandbox"
    try:
        up = _cli("up", "--detach", "--port", "0", "--seed", "5", home=tmp_path)
        assert up.returncode == 0, up.stderr
        env = _exports(up.stdout)
        assert set(env) == ENV_NAMES and env["TRAINCTL_SANDBOX"] == "1" and env["AWS_DEFAULT_REGION"] == "us-east-1"
        state = json.loads((state_dir / "state.json").read_text())
        assert env["AWS_ENDPOINT_URL"] == state["endpoint_url"] == f"http://127.0.0.1:{state['port']}"
        assert (state_dir / "sandbox.pid").read_text() == str(state["pid"]) and state["seed"] == 5
        assert process.is_alive(state["pid"]) and "started" in state

        # the printed environment is all boto3 needs
        s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_DEFAULT_REGION"],
                          aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
        assert "trainctl-123456789012-us-east-1" in {b["Name"] for b in s3.list_buckets()["Buckets"]}

        status = _cli("status", home=tmp_path)
        assert status.returncode == 0 and _exports(status.stdout) == env
        again = _cli("up", "--detach", home=tmp_path)
        assert again.returncode == 0 and "already running" in again.stderr and _exports(again.stdout) == env
        monkeypatch.setenv("TRAINCTL_HOME", str(tmp_path))
        assert cli.ensure_sandbox_env() == env  # `--sandbox` reuses the running one

        down = _cli("down", home=tmp_path)
        assert down.returncode == 0 and str(state["pid"]) in down.stderr
        assert not process.is_alive(state["pid"])
        assert not (state_dir / "sandbox.pid").exists() and not (state_dir / "state.json").exists()
        assert _cli("status", home=tmp_path).returncode == 1

        # none runs: the global `--sandbox` (through the plugin's entry point) starts one
        listed = subprocess.run([sys.executable, "-m", "trainctl.cli", "--sandbox", "catalog", "g5.xlarge"],
                                env={**os.environ, "TRAINCTL_HOME": str(tmp_path)}, capture_output=True, text=True,
                                timeout=120)
        assert listed.returncode == 0 and "g5.xlarge" in listed.stdout, listed.stderr
        assert "started a sandbox at" in listed.stderr
        assert process.running(state_dir) is not None
    finally:
        process.stop(state_dir)
    assert process.running(state_dir) is None


def test_stop_kills_every_process_the_server_started(tmp_path):
    """A stand-in server that ignores SIGTERM and starts a job in its own session, as torchrun would."""
    script = textwrap.dedent("""
        import signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
        print(job.pid, flush=True)
        time.sleep(300)
    """)
    server = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    job_pid = int(server.stdout.readline())
    state_dir = tmp_path / "sandbox"
    process.write_state(state_dir, {"pid": server.pid, "endpoint_url": "http://127.0.0.1:9", "port": 9})
    try:
        assert process.stop(state_dir, timeout=0.5, grace=0.5) == server.pid
        server.wait(timeout=10)
        assert not process.is_alive(job_pid)
        assert not (state_dir / "sandbox.pid").exists()
    finally:
        for pid in (server.pid, job_pid):
            if process.is_alive(pid):
                os.kill(pid, 9)


def test_importing_the_cli_imports_neither_moto_nor_boto3():
    code = "import sys, trainctl_sandbox.cli; print(sorted(m for m in sys.modules if m.split('.')[0] in ('moto', 'boto3', 'botocore')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_fault_switches_are_subcommands_listed_in_help(tmp_path):
    """`trainctl sandbox capacity TYPE AZ off`, `throttle`, `latency`, `clear-faults`, `interrupt JOB`: one line
    each, acting on the running sandbox; without one, one line saying how to start it."""
    from trainctl_sandbox.admin import SandboxAdmin

    helped = " ".join(_cli("--help", home=tmp_path).stdout.split())
    for name in ("interrupt", "capacity", "throttle", "latency", "quota", "clear-faults"):
        assert f" {name} " in helped
    missing = _cli("capacity", "g5.xlarge", "us-east-1a", "off", home=tmp_path)
    assert missing.returncode == 1 and "no sandbox running" in missing.stderr
    state_dir = tmp_path / "sandbox"
    try:
        up = _cli("up", "--detach", "--port", "0", home=tmp_path)
        assert up.returncode == 0, up.stderr
        admin = SandboxAdmin(_exports(up.stdout)["AWS_ENDPOINT_URL"])
        off = _cli("capacity", "g5.xlarge", "us-east-1a", "off", home=tmp_path)
        assert off.returncode == 0 and off.stderr.strip() == "capacity of g5.xlarge in us-east-1a: off"
        assert _cli("capacity", "g5.2xlarge", "all", "2", home=tmp_path).returncode == 0
        assert _cli("throttle", "RunInstances", "2", home=tmp_path).returncode == 0
        assert _cli("latency", "*", "5", home=tmp_path).returncode == 0
        faults = json.dumps(admin.info()["faults"])
        assert "g5.xlarge" in faults and "us-east-1a" in faults and "g5.2xlarge" in faults
        assert "RunInstances" in faults
        bad = _cli("capacity", "g5.xlarge", "us-east-1a", "maybe", home=tmp_path)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
        unknown = _cli("interrupt", "no-such-job", home=tmp_path)
        assert unknown.returncode == 2 and unknown.stderr.startswith("sandbox: ")
        assert len(unknown.stderr.strip().splitlines()) == 1 and "no-such-job" in unknown.stderr
        assert _cli("clear-faults", home=tmp_path).returncode == 0
        assert "g5.xlarge" not in json.dumps(admin.info()["faults"])
    finally:
        process.stop(state_dir)
