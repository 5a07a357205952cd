"""The EC2 node agent runs a script under SageMaker's contract and decides the outcome from what it knows, never
from the script's output (issue 37; issue 36 item 3): real agents in this process against the sandbox, real
torchrun, small pure-Python scripts (no torch import in the script: the agent runs whatever the entrypoint is).
- a plain argparse script that rejects unknown flags gets exactly its arguments (a boolean as `True`), SageMaker's
  SM_* variables and folders; its own checkpoint names, a sub-folder included, reach S3;
- a script that crashes fails the job at once (no rerun) with the tail of its stderr as the failure reason, and the
  other node of the job stops and leaves;
- a script that exits 0 after one node's Spot notice is recorded interrupted on both nodes, never completed;
- a script that ignores SIGTERM is killed after the grace when the budget stops the job."""
from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.support.node_agent_helpers import BUCKET, FakeImds, code_tarball, make_agent, s3_keys

# Written from docs/your-script.md alone: strict argparse, SageMaker's variables and folders, write then rename.
OWN = '''
import argparse, json, os, signal, sys, time
p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, required=True)
p.add_argument("--fast", choices=("True", "False"), required=True)
a = p.parse_args()  # an unknown flag (an appended --checkpoint-dir) ends the script with exit code 2
base = os.environ.get("SAGEMAKER_BASE_DIR", "/opt/ml")
ckpt = os.path.join(base, "checkpoints")
for name in ("SM_MODEL_DIR", "SM_HOSTS", "SM_CURRENT_HOST", "SM_NUM_GPUS", "SM_HPS", "SM_OUTPUT_DATA_DIR",
             "SM_INPUT_DIR", "SM_CHANNELS"):
    assert name in os.environ, name
assert json.loads(os.environ["SM_HPS"]) == {"steps": a.steps, "fast": True}, os.environ["SM_HPS"]
assert json.loads(os.environ["SM_HOSTS"])[0] == "algo-1"
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
def save(step):
    os.makedirs(os.path.join(ckpt, "extra"), exist_ok=True)
    for path, body in ((os.path.join(ckpt, "state.json"), json.dumps({"step": step})),
                       (os.path.join(ckpt, "extra", "opt.bin"), "x" * step)):
        with open(path + ".tmp", "w") as f:
            f.write(body)
        os.replace(path + ".tmp", path)
start = 0
if os.path.exists(os.path.join(ckpt, "state.json")):
    start = json.load(open(os.path.join(ckpt, "state.json")))["step"]
if os.environ.get("CRASH_ON") == os.environ["SM_CURRENT_HOST"]:
    print("about to divide", file=sys.stderr, flush=True)
    1 / 0
for step in range(start + 1, a.steps + 1):
    if stop:
        save(step)
        sys.exit(0)
    if step % 5 == 0:
        save(step)
    print(f"trainctl step={step} loss=1.0 samples_per_s=10", flush=True)
    time.sleep(0.05)
save(a.steps)
os.makedirs(os.environ["SM_MODEL_DIR"], exist_ok=True)
open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w").write("done")
'''

STUBBORN = '''
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("trainctl step=1 loss=1.0 samples_per_s=10", flush=True)
while True:
    time.sleep(0.1)
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fast(monkeypatch):
    for name, value in (("SPOT_POLL_S", "0.2"), ("PEER_POLL_S", "0.2"), ("STOP_POLL_S", "0.3"),
                        ("CHECKPOINT_SYNC_S", "0.5"), ("STOP_GRACE_S", "30"), ("CHECKPOINT_SETTLE_S", "0.2")):
        monkeypatch.setenv(f"TRAINCTL_{name}", value)
    monkeypatch.setenv("TRAINCTL_MASTER_ADDR", "127.0.0.1")  # every node of the job is this machine


def _nodes(sb, tmp_path, job: str, script: str, args: list[str], count: int = 1, **cfg):
    ec2 = sb.client("ec2")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    port, out = _free_port(), []
    for n in range(count):
        ip = f"127.0.0.{n + 1}"
        inst = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="t3.micro", PrivateIpAddress=ip,
                                 TagSpecifications=[{"ResourceType": "instance", "Tags": [
                                     {"Key": "trainctl:job", "Value": job}]}])["Instances"][0]
        imds = FakeImds(inst["InstanceId"], ip)
        agent = make_agent(sb, tmp_path / f"node{n}" / "opt", job, imds, master_port=port, args=args, nnodes=count,
                           **cfg)
        out.append((agent, imds))
    sb.client("s3").put_object(Bucket=BUCKET, Key=f"{job}/code/sourcedir.tar.gz", Body=code_tarball({"train.py": script}))
    return out


def _start(agent) -> tuple[threading.Thread, list]:
    result: list = []
    thread = threading.Thread(target=lambda: result.append(agent.run()), daemon=True)
    thread.start()
    return thread, result


def _close(nodes) -> None:
    for agent, imds in nodes:
        agent.log.stopping.set()
        agent.log.join(timeout=30)  # its last lines reach the log group
        imds.close()


def _logged(sb, job: str, agent, text: str) -> bool:
    try:
        events = sb.client("logs").get_log_events(logGroupName=f"/trainctl/{job}", logStreamName=agent.instance_id,
                                                  startFromHead=True)["events"]
    except Exception:  # noqa: BLE001 - not created yet
        return False
    return any(text in e["message"] for e in events)


def _text(sb, key: str) -> str:
    return sb.client("s3").get_object(Bucket=BUCKET, Key=key)["Body"].read().decode()


def test_an_own_argparse_script_gets_exactly_its_arguments_and_its_checkpoints_reach_s3(sandbox_env, tmp_path, fast):
    sb = sandbox_env
    nodes = _nodes(sb, tmp_path, "own-job", OWN, ["--fast", "True", "--steps", "12"])
    try:
        assert nodes[0][0].run() == 0
    finally:
        _close(nodes)
    assert s3_keys(sb, "own-job/status/") == ["own-job/status/completed"]
    assert s3_keys(sb, "own-job/checkpoints/") == ["own-job/checkpoints/extra/opt.bin",
                                                   "own-job/checkpoints/state.json"]
    assert _text(sb, "own-job/checkpoints/state.json") == '{"step": 12}'
    assert s3_keys(sb, "own-job/output/model/") == ["own-job/output/model/model.txt"]


def test_a_crash_fails_the_job_with_its_stderr_and_the_other_node_stops(sandbox_env, tmp_path, fast, monkeypatch):
    sb = sandbox_env
    monkeypatch.setenv("CRASH_ON", "algo-1")  # rank 0 crashes; rank 1 would train for a minute
    nodes = _nodes(sb, tmp_path, "crash-job", OWN, ["--fast", "True", "--steps", "1200"], count=2)
    runs = [_start(agent) for agent, _ in nodes]
    try:
        for thread, _ in runs:
            thread.join(timeout=120)
    finally:
        _close(nodes)
    assert [r for _, r in runs] == [[1], [1]]  # both shut down at once
    reason = _text(sb, "crash-job/status/failed")
    assert "ZeroDivisionError: division by zero" in reason and "about to divide" in reason, reason
    assert reason.startswith("AlgorithmError: the script exited 1 on ")
    assert not _logged(sb, "crash-job", nodes[0][0], "retry")  # no rerun unless entrypoint.max_retries asks
    assert _logged(sb, "crash-job", nodes[1][0], "another node failed the job")
    # what `watch` shows: the job failed with the script's error
    from trainctl.backends.ec2 import status

    view = status.describe(lambda service, region: sb.client(service), "crash-job", "us-east-1")
    assert view.status == "Failed" and "ZeroDivisionError" in view.failure_reason
    # these stand-in nodes never shut down (no `shutdown` in this process): watch names them and the command
    assert "still running: " in view.failure_reason and "`trainctl down crash-job`" in view.failure_reason
    assert all(agent.instance_id in view.failure_reason for agent, _ in nodes)


def test_an_exit_0_after_one_node_s_notice_is_interrupted_on_both(sandbox_env, tmp_path, fast):
    sb = sandbox_env
    nodes = _nodes(sb, tmp_path, "notice2-job", OWN, ["--fast", "True", "--steps", "1200"], count=2)
    runs = [_start(agent) for agent, _ in nodes]
    (a, imds_a), (b, _) = nodes
    try:
        while not s3_keys(sb, "notice2-job/checkpoints/"):  # both training (pytest-timeout bounds it)
            assert all(t.is_alive() for t, _ in runs), [r for _, r in runs]
            time.sleep(0.2)
        imds_a.notice.set()  # only node a is reclaimed; its script checkpoints and exits 0
        runs[0][0].join(timeout=120)
        assert runs[0][1] == [0]
        while not _logged(sb, "notice2-job", b, "waiting for its replacement"):
            assert runs[1][0].is_alive(), runs[1][1]
            time.sleep(0.2)
        sb.client("s3").put_object(Bucket=BUCKET, Key="notice2-job/status/stopped", Body=b"test over")
        runs[1][0].join(timeout=120)
    finally:
        _close(nodes)
    assert "notice2-job/status/completed" not in s3_keys(sb, "notice2-job/status/")
    assert _logged(sb, "notice2-job", a, "interrupted (exit code 0)")
    assert _logged(sb, "notice2-job", b, "interrupted (exit code 0)")


def test_a_script_that_ignores_sigterm_is_killed_after_the_grace_on_a_budget_stop(sandbox_env, tmp_path, fast,
                                                                                 monkeypatch):
    sb = sandbox_env
    monkeypatch.setenv("TRAINCTL_STOP_GRACE_S", "3")  # in the node config on AWS: at most SageMaker's 120 s
    nodes = _nodes(sb, tmp_path, "stubborn-job", STUBBORN, [])
    agent = nodes[0][0]
    thread, result = _start(agent)
    try:
        while not _logged(sb, "stubborn-job", agent, "trainctl step=1"):
            assert thread.is_alive(), result
            time.sleep(0.2)
        agent.cfg.update(budget_usd=0.01, node_hourly_usd=1000.0)  # the budget is spent from now on
        thread.join(timeout=120)
    finally:
        _close(nodes)
    assert result == [0]
    assert _logged(sb, "stubborn-job", agent, "did not exit within 3 s of SIGTERM; killing it")
    assert _text(sb, "stubborn-job/status/stopped").startswith("budget $0.01 reached")
    assert not _logged(sb, "stubborn-job", agent, "maximum runtime")  # the right reason (issue 36.15)


def test_a_failure_is_rerun_only_as_often_as_the_spec_asks_and_each_rerun_is_said(sandbox_env, tmp_path, fast,
                                                                                  monkeypatch):
    sb = sandbox_env
    monkeypatch.setenv("CRASH_ON", "algo-1")
    nodes = _nodes(sb, tmp_path, "retry-job", OWN, ["--fast", "True", "--steps", "5"], max_retries=1)
    try:
        assert nodes[0][0].run() == 1
    finally:
        _close(nodes)
    assert _logged(sb, "retry-job", nodes[0][0], "retry 1 of 1: the script exited 1")
    assert not _logged(sb, "retry-job", nodes[0][0], "retry 2")
    assert "ZeroDivisionError" in _text(sb, "retry-job/status/failed")


def test_the_runtime_stops_the_training_while_s3_is_throttled_and_the_mark_cannot_be_written(sandbox_env, tmp_path,
                                                                                            fast):
    """Issue 36.4: no S3 listing and no stop mark, yet the maximum runtime stops the training."""
    from botocore.exceptions import ClientError

    sb = sandbox_env
    nodes = _nodes(sb, tmp_path, "throttled-job", OWN, ["--fast", "True", "--steps", "100000"],
                   max_runtime_s=3600, not_after=time.time() + 3600)
    agent = nodes[0][0]
    thread, result = _start(agent)
    throttled = []

    def throttle(params, **_):  # S3 answers SlowDown to every listing and every status write from now on
        if throttled and (params.get("Prefix", "").endswith("/status/") or "/status/" in params.get("Key", "")):
            raise ClientError({"Error": {"Code": "SlowDown", "Message": "Please reduce your request rate."}},
                              "ListObjectsV2")

    for op in ("ListObjectsV2", "PutObject"):
        agent.s3.meta.events.register(f"before-parameter-build.s3.{op}", throttle)
    try:
        while not s3_keys(sb, "throttled-job/checkpoints/"):  # training (pytest-timeout bounds it)
            assert thread.is_alive(), result
            time.sleep(0.2)
        throttled.append(1)
        agent.cfg["not_after"] = time.time()  # the clock reaches the job's end, as if an hour had passed
        thread.join(timeout=120)
    finally:
        _close(nodes)
    assert result == [0]
    assert _logged(sb, "throttled-job", agent, "could not write the job's stop mark")
    assert _logged(sb, "throttled-job", agent, "maximum runtime reached")
    assert s3_keys(sb, "throttled-job/status/") == []  # S3 never took the mark: the training stopped anyway
