"""Each sandbox host's own /opt/ml (private_mounts.py): two hosts of one job, run as the sandbox runs them, each
see their own folder at /opt/ml and start in /opt/ml/code with exactly the job's hyperparameters; where private
mounts are not possible, the fallback names the host folders, appends --checkpoint-dir and says so once."""
from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from trainctl_sandbox.server import private_mounts
from trainctl_sandbox.sagemaker.container import Container, Host

SCRIPT = """import json, os, sys
os.makedirs("/opt/ml/checkpoints", exist_ok=True)
with open("/opt/ml/checkpoints/mine.txt", "w") as f:
    f.write(os.environ["SM_CURRENT_HOST"])
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "model": os.environ["SM_MODEL_DIR"],
                  "seen": sorted(os.listdir("/opt/ml/checkpoints"))}))
"""


def _container(private: bool, **request) -> Container:
    request = {"HyperParameters": {"sagemaker_program": '"show.py"', "sagemaker_submit_directory": '"s3://b/k"',
                                   "epochs": "3", "verbose": "true"}, **request}
    return Container(job_name="job", arn="arn:aws:sagemaker:us-east-1:123456789012:training-job/job",
                     region="us-east-1", request=request, instance_type="ml.g5.xlarge", checkpoint_uri="s3://b/c",
                     checkpoint_local="/opt/ml/checkpoints", endpoint_url="http://127.0.0.1:1", marker="test",
                     private=private)


def _hosts(tmp_path: Path) -> list[Host]:
    hosts = [Host(index=i, base=tmp_path / f"algo-{i}") for i in (1, 2)]
    for host in hosts:
        host.code.mkdir(parents=True)
        (host.code / "show.py").write_text(SCRIPT)
    return hosts


@pytest.mark.skipif(private_mounts.unavailable() is not None, reason=str(private_mounts.unavailable()))
def test_each_host_sees_its_own_opt_ml_and_exactly_its_hyperparameters(tmp_path):
    container, hosts = _container(private=True), _hosts(tmp_path)
    seen = []
    for host in hosts:
        cmd, env = container.command(host, hosts, 29500)
        assert "--checkpoint-dir" not in cmd and env["SM_MODEL_DIR"] == "/opt/ml/model"
        done = subprocess.run(cmd, cwd=host.code, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        seen.append(json.loads(done.stdout))
    for host, view in zip(hosts, seen):
        # the toolkit's to_cmd_args: sorted keys, JSON-decoded values as str(): a boolean is True
        assert view == {"argv": ["--epochs", "3", "--verbose", "True"], "cwd": "/opt/ml/code",
                        "model": "/opt/ml/model", "seen": ["mine.txt"]}
        assert (host.checkpoints / "mine.txt").read_text() == host.name  # the host's own folder, seen from here
    assert not Path("/opt/ml/checkpoints/mine.txt").exists()  # nothing reached the machine's /opt/ml


def test_without_private_mounts_the_host_folders_are_named_and_the_fallback_is_said_once(tmp_path, caplog,
                                                                                         monkeypatch):
    monkeypatch.setenv(private_mounts.SWITCH_ENV, "0")
    monkeypatch.setattr(private_mounts, "_said", set())
    container, hosts = _container(private=False), _hosts(tmp_path)
    with caplog.at_level(logging.WARNING, logger="trainctl_sandbox"):
        for host in hosts:
            cmd, env = container.command(host, hosts, 29500)
            assert cmd == [sys.executable, "show.py", "--epochs", "3", "--verbose", "True",
                           "--checkpoint-dir", str(host.checkpoints)]
            assert env["SM_MODEL_DIR"] == str(host.model) and env["SAGEMAKER_BASE_DIR"] == str(host.base)
    (said,) = [r.getMessage() for r in caplog.records]
    assert said.startswith("SageMaker hosts do not get a private /opt/ml (switched off")
    assert "--checkpoint-dir <host folder>/checkpoints" in said
