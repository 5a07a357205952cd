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

import pytest

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


def _agent_process(sb, tmp_path, job: str, imds: FakeImds) -> subprocess.Popen:
    """The node agent as the user data starts it (its own process, so SIGTERM is the real signal), in the
    sandbox's account, with a fake IMDS and no real shutdown."""
    import json

    from tests.support.node_agent_helpers import node_config

    config = tmp_path / "config.json"
    config.write_text(json.dumps(node_config(job)))
    (tmp_path / "root").mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TRAINCTL_NO_SHUTDOWN": "1",
           "TRAINCTL_IMDS_ENDPOINT": imds.endpoint, "AWS_ENDPOINT_URL": sb.endpoint_url,
           "AWS_ACCESS_KEY_ID": sb.env["AWS_ACCESS_KEY_ID"], "AWS_SECRET_ACCESS_KEY": sb.env["AWS_SECRET_ACCESS_KEY"],
           "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
           "TRAINCTL_SPOT_POLL_S": "0.2", "TRAINCTL_STOP_POLL_S": "0.2"}
    return subprocess.Popen([sys.executable, "-m", "trainctl.bootstrap.agent", "--config", str(config), "--root",
                             str(tmp_path / "root")], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def test_a_node_whose_instance_goes_down_during_its_setup_does_not_fail_the_job(sandbox_env, tmp_path):
    """A reclaim whose notice the agent never saw (it came, or the machine went, before the agent looked): the
    shutdown's SIGTERM reaches the agent mid-setup, and the setup then fails as the machine goes (here: its code
    is gone when the held download resumes). That is not the job's failure: no `failed` mark, so the survivors
    (or `watch --recover`) replace the node instead of the job reading Failed."""
    import signal
    import time

    from tests.support.node_agent_helpers import BUCKET, s3_keys

    sb, job = sandbox_env, "setup-sigterm"
    s3 = sb.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key=f"{job}/code/sourcedir.tar.gz", Body=code_tarball({"train.py": "print(1)\n"}))
    imds = FakeImds(INSTANCE_ID, "10.0.0.5")
    sb.admin.set_latency("HeadObject", 3_600_000)  # the code's download is held: the agent is mid-setup
    try:
        agent = _agent_process(sb, tmp_path, job, imds)
        first = agent.stdout.readline()  # "trainctl-agent: instance ...": its setup has begun
        assert "trainctl-agent: instance" in first, first + agent.communicate()[0]
        time.sleep(0.5)
        agent.send_signal(signal.SIGTERM)  # the instance's shutdown
        s3.delete_object(Bucket=BUCKET, Key=f"{job}/code/sourcedir.tar.gz")  # the setup fails when it resumes
    finally:
        sb.admin.set_latency("HeadObject", 0)
        imds.close()
    out = first + agent.communicate(timeout=120)[0]
    assert "already shutting down (SIGTERM)" in out, out
    assert f"{job}/status/failed" not in s3_keys(sb, f"{job}/status/"), out


# Under SageMaker's contract: on SIGTERM, checkpoint and exit 0 (as the bundled entrypoints do).
TRAIN_UNTIL_SIGTERM = """
import signal, sys, time
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
for step in range(1, 100000):
    if stop:
        print(f"trainctl stopped step={step}", flush=True)
        sys.exit(0)
    print(f"trainctl step={step}", flush=True)
    time.sleep(0.05)
"""


@pytest.mark.timeout(300)
def test_a_node_whose_instance_goes_down_while_it_trains_records_neither_a_failure_nor_the_end(sandbox_env,
                                                                                               tmp_path):
    """The shutdown's SIGTERM with no Spot notice seen (a reclaim the agent missed, a termination) while the script
    trains: the script honours it and exits 0, which must not read as the job's completion (nor its failure)."""
    import signal

    from tests.support.node_agent_helpers import BUCKET, s3_keys

    sb, job = sandbox_env, "train-sigterm"
    s3 = sb.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key=f"{job}/code/sourcedir.tar.gz",
                  Body=code_tarball({"train.py": TRAIN_UNTIL_SIGTERM}))
    ec2 = sb.client("ec2")  # the node: an instance of the job (its peers are found by tag) on this machine
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    node = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="t3.micro",
                             PrivateIpAddress="127.0.0.1", TagSpecifications=[{"ResourceType": "instance", "Tags": [
                                 {"Key": "trainctl:job", "Value": job}]}])["Instances"][0]
    imds = FakeImds(node["InstanceId"], "127.0.0.1")
    out: list[str] = []
    try:
        agent = _agent_process(sb, tmp_path, job, imds)
        for line in agent.stdout:  # until it trains (pytest-timeout bounds it)
            out.append(line)
            if "trainctl step=20" in line:
                break
        assert agent.poll() is None, "".join(out)
        agent.send_signal(signal.SIGTERM)  # the instance's shutdown
        out.append(agent.communicate(timeout=180)[0])
    finally:
        if agent.poll() is None:
            agent.kill()
        imds.close()
    said = "".join(out)
    assert "trainctl stopped step=" in said and "shutting down (SIGTERM; exit code 0)" in said, said[-3000:]
    names = [k.rsplit("/", 1)[-1] for k in s3_keys(sb, f"{job}/status/")]
    assert "completed" not in names and "failed" not in names, (names, said[-3000:])
