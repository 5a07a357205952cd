"""The node agent stops well, run in this process against the sandbox with a real
torchrun:
- a Spot notice that arrives outside training ends the agent; it does not loop on S3 and EC2 until the reclaim;
- the stop mark (`trainctl stop`/`down`) and the job's maximum runtime are watched during the run: the training
  checkpoints, the agent uploads it, and only then returns (and the node shuts down).
The node is this machine, so the instance standing for it has the loopback address."""
from __future__ import annotations

import socket
import threading
import time

from tests.support.node_agent_helpers import BUCKET, FakeImds, code_tarball, make_agent, s3_keys

# A stand-in script under SageMaker's contract: checkpoints in /opt/ml/checkpoints (where SAGEMAKER_BASE_DIR puts
# /opt/ml), every 10 steps; on SIGTERM one more checkpoint, exit 0. Without a stop it would run for minutes.
TRAIN = '''
import hashlib, os, signal, sys, time
class a: checkpoint_dir = os.path.join(os.environ.get("SAGEMAKER_BASE_DIR", "/opt/ml"), "checkpoints")
os.makedirs(a.checkpoint_dir, exist_ok=True)
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
def save(step, why="step"):
    data = f"{why} {step}".encode()
    name = f"ckpt-{step:010d}-{hashlib.sha256(data).hexdigest()[:16]}.pt"
    tmp = os.path.join(a.checkpoint_dir, "." + name + ".tmp")
    open(tmp, "wb").write(data)
    os.replace(tmp, os.path.join(a.checkpoint_dir, name))
for step in range(1, 6001):
    if stop:
        save(step, "stopped at")
        print(f"trainctl stopped step={step}", flush=True)
        sys.exit(0)
    if step % 10 == 0:
        save(step)
    print(f"trainctl step={step}", flush=True)
    time.sleep(0.05)
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node(sb, tmp_path, monkeypatch, job: str, **cfg):
    monkeypatch.setenv("TRAINCTL_SPOT_POLL_S", "0.1")
    monkeypatch.setenv("TRAINCTL_PEER_POLL_S", "0.1")
    monkeypatch.setenv("TRAINCTL_STOP_POLL_S", "0.2")
    monkeypatch.setenv("TRAINCTL_CHECKPOINT_SYNC_S", "0.5")
    ec2 = sb.client("ec2")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    inst = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="t3.micro",
                             PrivateIpAddress="127.0.0.1", TagSpecifications=[{"ResourceType": "instance", "Tags": [
                                 {"Key": "trainctl:job", "Value": job}]}])["Instances"][0]
    imds = FakeImds(inst["InstanceId"], "127.0.0.1")
    agent = make_agent(sb, tmp_path / "node", job, imds, master_port=_free_port(), **cfg)
    sb.client("s3").put_object(Bucket=BUCKET, Key=f"{job}/code/sourcedir.tar.gz",
                               Body=code_tarball({"train.py": TRAIN}))
    return agent, imds


def _run_in_thread(agent) -> tuple[threading.Thread, list]:
    result: list = []
    thread = threading.Thread(target=lambda: result.append(agent.run()), daemon=True)
    thread.start()
    return thread, result


def _newest_checkpoint_step(sb, job: str) -> int:
    keys = s3_keys(sb, f"{job}/checkpoints/")
    return max(int(k.split("/")[-1][5:15]) for k in keys) if keys else 0


def _newest_checkpoint_text(sb, job: str) -> str:
    key = max(s3_keys(sb, f"{job}/checkpoints/"), key=lambda k: k.split("/")[-1])
    return sb.client("s3").get_object(Bucket=BUCKET, Key=key)["Body"].read().decode()


def test_a_notice_outside_training_ends_the_agent_without_a_busy_loop(sandbox_env, tmp_path, monkeypatch):
    sb = sandbox_env
    agent, imds = _node(sb, tmp_path, monkeypatch, "notice-job", nnodes=2)  # the peer never comes
    calls: list[str] = []

    def count(event_name, **_):
        calls.append(event_name)
        if len(calls) > 200:  # far more than a backing-off agent makes; ends a busy loop instead of hanging
            raise RuntimeError("busy loop: over 200 AWS calls")

    for client in (agent.s3, agent.ec2):
        client.meta.events.register("before-call", count)
    imds.notice.set()
    try:
        assert agent.run() == 0
    finally:
        agent.log.stopping.set()
        imds.close()
    assert len(calls) < 50, len(calls)
    # a notice is not a job status: only the mark that tells the other nodes of it
    assert s3_keys(sb, "notice-job/status/") == [f"notice-job/status/interrupted-{agent.instance_id}"]


def test_the_stop_mark_during_the_run_checkpoints_uploads_then_returns(sandbox_env, tmp_path, monkeypatch):
    sb = sandbox_env
    agent, imds = _node(sb, tmp_path, monkeypatch, "stop-job")
    thread, result = _run_in_thread(agent)
    try:
        while _newest_checkpoint_step(sb, "stop-job") < 20:  # training, and syncing (pytest-timeout bounds it)
            assert thread.is_alive(), result
            time.sleep(0.1)
        marked_at = _newest_checkpoint_step(sb, "stop-job")
        sb.client("s3").put_object(Bucket=BUCKET, Key="stop-job/status/stopped", Body=b"trainctl stop")
        thread.join(timeout=120)
    finally:
        agent.log.stopping.set()
        imds.close()
    assert result == [0]
    # The checkpoint the entrypoint took at the stop is in S3: uploaded before the agent returned.
    assert _newest_checkpoint_text(sb, "stop-job").startswith("stopped at"), _newest_checkpoint_text(sb, "stop-job")
    assert _newest_checkpoint_step(sb, "stop-job") > marked_at
    assert s3_keys(sb, "stop-job/status/") == ["stop-job/status/stopped"]


def test_the_maximum_runtime_stops_the_run_and_marks_the_job(sandbox_env, tmp_path, monkeypatch):
    sb = sandbox_env
    agent, imds = _node(sb, tmp_path, monkeypatch, "deadline-job", max_runtime_s=3600, not_after=time.time() + 3600)
    thread, result = _run_in_thread(agent)
    try:
        while _newest_checkpoint_step(sb, "deadline-job") < 20:  # training (pytest-timeout bounds it)
            assert thread.is_alive(), result
            time.sleep(0.1)
        agent.cfg["not_after"] = time.time()  # the clock reaches the job's end, as if an hour had passed
        thread.join(timeout=120)
    finally:
        agent.log.stopping.set()
        imds.close()
    assert result == [0]
    assert s3_keys(sb, "deadline-job/status/") == ["deadline-job/status/stopped"]
    body = sb.client("s3").get_object(Bucket=BUCKET, Key="deadline-job/status/stopped")["Body"].read().decode()
    assert "maximum runtime" in body
    assert _newest_checkpoint_text(sb, "deadline-job").startswith("stopped at")  # taken at the stop, uploaded


def test_a_node_that_starts_after_the_maximum_runtime_does_not_train(sandbox_env, tmp_path, monkeypatch):
    sb = sandbox_env
    agent, imds = _node(sb, tmp_path, monkeypatch, "late-job", max_runtime_s=60, not_after=time.time() - 1)
    try:
        assert agent.run() == 0
    finally:
        agent.log.stopping.set()
        imds.close()
    assert s3_keys(sb, "late-job/checkpoints/") == []
    assert s3_keys(sb, "late-job/status/") == ["late-job/status/stopped"]
