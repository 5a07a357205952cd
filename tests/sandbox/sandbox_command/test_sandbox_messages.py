"""The sandbox's command line says things whole: `sandbox --help` shows every summary without an ellipsis, and a
fault the sandbox refuses (interrupting a job it cannot interrupt) is one clean line, not a Python exception name."""
from __future__ import annotations

import pytest

from tests.support.helpers import run_cli


@pytest.mark.parametrize("columns", [80, 100])
def test_sandbox_help_shows_every_summary_whole(tmp_path, columns):
    proc = run_cli(["sandbox", "--help"], tmp_path, env={"COLUMNS": str(columns)})
    assert proc.returncode == 0, proc.stderr
    commands = proc.stdout.split("Commands:")[1]
    assert "..." not in commands and "…" not in commands
    assert "Spot-interrupt a SageMaker or EC2 job." in commands


def test_a_refused_interrupt_is_one_line_without_an_exception_name(sandbox):
    # An EC2 job whose only node is On-Demand: nothing for a Spot reclaim to take, so the sandbox refuses
    from trainctl_sandbox.server.seed import ami_id

    sandbox.client("ec2").run_instances(
        ImageId=ami_id("us-east-1", "gpu-pytorch-2.7"), InstanceType="g5.xlarge", MinCount=1, MaxCount=1,
        MetadataOptions={"HttpTokens": "required"},
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "trainctl:job", "Value": "od-job"}]}])
    proc = run_cli(["sandbox", "interrupt", "od-job"], sandbox.state_dir.parent, env=sandbox.env, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sandbox: od-job has no running Spot instance"), \
        proc.stderr
    assert "Error:" not in lines[0] and "Traceback" not in proc.stderr


def test_sandbox_flag_uses_a_busy_sandbox_instead_of_starting_a_second(sandbox):
    # A sandbox busy with a training job may not answer within 2 s; `--sandbox` must still use it: a second
    # sandbox on another port would hide the first one's jobs (kept per endpoint). SIGSTOP makes it that busy.
    import os
    import signal

    from trainctl_sandbox.server import process

    home = sandbox.state_dir.parent
    os.kill(sandbox.pid, signal.SIGSTOP)
    try:
        proc = run_cli(["--sandbox", "-o", "json", "ls", "--no-status"], home, timeout=60)
    finally:
        os.kill(sandbox.pid, signal.SIGCONT)
    assert proc.returncode == 0, proc.stderr
    assert "started a sandbox" not in proc.stderr
    assert f"the sandbox at {sandbox.endpoint_url} (pid {sandbox.pid}) is slow to answer; using it" in proc.stderr
    assert process.read_state(sandbox.state_dir)["pid"] == sandbox.pid
