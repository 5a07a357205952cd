"""A node that cannot do its work shuts itself down (no GPU node may bill silently).

The real user data runs in a subprocess with a fake `shutdown` first on PATH that records how it was
called: once when IMDS and AWS cannot be reached at all (a multi-card node with no public IP and no NAT:
the user data's loader cannot download the node agent), once when the agent in S3 is missing or not the
launch's bytes, and once when AWS answers but the job's code is missing, where the agent's last lines must
also reach CloudWatch Logs before the node goes down.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.support.node_agent_helpers import FakeImds, code_tarball, upload_agent
from trainctl.bootstrap import render_user_data

JOB = "shutdown-1"


INSTANCE_ID = "i-0shutdown000000001"  # the node the fake IMDS answers for

def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens here once the socket is closed


def _fake_shutdown(tmp_path: Path) -> tuple[Path, Path]:
    bin_dir, record = tmp_path / "bin", tmp_path / "shutdown-called"
    bin_dir.mkdir()
    script = bin_dir / "shutdown"
    script.write_text(f'#!/bin/sh\necho "$@" >> {record}\n')
    script.chmod(0o755)
    return bin_dir, record


NO_AGENT = {"agent_key": "trainctl/agent/" + "0" * 64 + "/trainctl_node.tar.gz", "agent_sha256": "0" * 64}


def _run_user_data(tmp_path: Path, env: dict, code_key: str = f"{JOB}/code/sourcedir.tar.gz",
                   bucket: str = "trainctl-123456789012-us-east-1",
                   agent: dict | None = None) -> subprocess.CompletedProcess:
    config = {"job_id": JOB, "region": "us-east-1", "bucket": bucket, "code_key": code_key,
              "script": "train.py", "args": [], "nnodes": 1, "nproc_per_node": 1, "accelerator": "gpu",
              **(agent or NO_AGENT)}
    script = tmp_path / "user-data.sh"
    script.write_text(render_user_data(config))
    root = tmp_path / "root"
    full_env = {"PATH": env.pop("PATH"), "HOME": str(tmp_path), "LANG": "C.UTF-8",
                "TRAINCTL_ROOT": str(root), "TRAINCTL_PYTHON": sys.executable,
                "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": str(tmp_path / "none"),
                "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), **env}
    # The limit is a safety net for a hung agent, not a timing assertion.
    return subprocess.run(["bash", str(script)], env=full_env, capture_output=True, text=True, timeout=240)


def test_a_node_that_cannot_reach_imds_or_aws_shuts_down(tmp_path):
    bin_dir, record = _fake_shutdown(tmp_path)
    port = _closed_port()
    proc = _run_user_data(tmp_path, {
        "PATH": f"{bin_dir}:{os.environ['PATH']}", "TRAINCTL_IMDS_ENDPOINT": f"http://127.0.0.1:{port}",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"})
    assert proc.returncode != 0
    assert "cannot download the node agent" in proc.stderr
    assert "shutting this node down" in proc.stdout + proc.stderr
    assert record.read_text().split("\n")[0] == "-h now"


def _run_node_against(sb, tmp_path, bucket: str, agent: dict | None = None):
    """The user data as a node of the sandbox's account: a fake IMDS and a recording `shutdown`."""
    imds = FakeImds(INSTANCE_ID, "10.0.0.5")
    bin_dir, record = _fake_shutdown(tmp_path)
    try:
        proc = _run_user_data(tmp_path, {
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "TRAINCTL_IMDS_ENDPOINT": imds.endpoint,
            "AWS_ENDPOINT_URL": sb.endpoint_url, "AWS_ACCESS_KEY_ID": sb.env["AWS_ACCESS_KEY_ID"],
            "AWS_SECRET_ACCESS_KEY": sb.env["AWS_SECRET_ACCESS_KEY"]}, bucket=bucket,
            agent=upload_agent(sb.client("s3"), bucket) if agent is None else agent)
    finally:
        imds.close()
    return proc, record


def test_a_node_whose_code_is_missing_ships_its_log_and_shuts_down(sandbox_env, tmp_path):
    sb = sandbox_env
    bucket = "trainctl-123456789012-us-east-1"
    sb.client("s3").create_bucket(Bucket=bucket)
    proc, record = _run_node_against(sb, tmp_path, bucket)
    assert proc.returncode != 0
    assert record.read_text().split("\n")[0] == "-h now"
    events = sb.client("logs").get_log_events(logGroupName=f"/trainctl/{JOB}",
                                              logStreamName=INSTANCE_ID)["events"]
    assert any("failed" in e["message"] and "shutting this node down" in e["message"] for e in events)


def test_a_node_of_a_stopped_job_shuts_down_at_once_not_after_the_finished_jobs_minute(sandbox_env, tmp_path):
    """`trainctl stop` waits a bounded grace for the nodes to go: a node whose job carries
    the stop mark has nothing to keep it, so its agent shuts it down now, not after a finished job's minute."""
    sb = sandbox_env
    bucket = "trainctl-123456789012-us-east-1"
    sb.client("s3").create_bucket(Bucket=bucket)
    code = code_tarball({"train.py": "print('never run')\n"})
    sb.client("s3").put_object(Bucket=bucket, Key=f"{JOB}/code/sourcedir.tar.gz", Body=code)
    sb.client("s3").put_object(Bucket=bucket, Key=f"{JOB}/status/stopped", Body=b"trainctl stop")
    proc, record = _run_node_against(sb, tmp_path, bucket)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert record.read_text().split("\n")[0] == "-h now"


def test_a_node_whose_agent_is_missing_from_the_bucket_shuts_down(sandbox_env, tmp_path):
    sb = sandbox_env
    bucket = "trainctl-123456789012-us-east-1"
    sb.client("s3").create_bucket(Bucket=bucket)
    proc, record = _run_node_against(sb, tmp_path, bucket, agent=NO_AGENT)
    assert proc.returncode != 0
    assert "cannot download the node agent" in proc.stderr
    assert record.read_text().split("\n")[0] == "-h now"
    assert not (tmp_path / "root" / "trainctl_node").exists()


def test_a_node_refuses_an_agent_whose_bytes_are_not_the_launchs_and_shuts_down(sandbox_env, tmp_path):
    sb = sandbox_env
    bucket = "trainctl-123456789012-us-east-1"
    sb.client("s3").create_bucket(Bucket=bucket)
    agent = upload_agent(sb.client("s3"), bucket)
    sb.client("s3").put_object(Bucket=bucket, Key=agent["agent_key"], Body=code_tarball({"x.py": "print(1)\n"}))
    proc, record = _run_node_against(sb, tmp_path, bucket, agent=agent)
    assert proc.returncode != 0
    assert "not the launch's" in proc.stderr
    assert record.read_text().split("\n")[0] == "-h now"
    assert not (tmp_path / "root" / "trainctl_node").exists()
