"""`watch` folds torchrun's interruption tracebacks (about 25 lines each) into one line of its log pane, and
`logs` keeps every line. Through the CLI against the sandbox: an EC2 job whose host logged a
traceback between its metric lines, watched to its end."""
from __future__ import annotations

import json
import time

from tests.support.helpers import CONFIGS, run_cli
from trainctl.backends.base import LogLine
from trainctl.text.logfold import TracebackFolder

TRACEBACK = """\
Traceback (most recent call last):
  File "/opt/conda/bin/torchrun", line 8, in <module>
    sys.exit(main())
             ^^^^^^
  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", \
line 355, in wrapper
    return f(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^
  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/run.py", line 919, in main
    run(args)
  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/run.py", line 910, in run
    elastic_launch(
  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 138, in __call__
    return launch_agent(self._config, self._entrypoint, list(args))
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 260, in launch_agent
    result = agent.run()
             ^^^^^^^^^^^
  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/elastic/agent/server/api.py", line 696, in run
    result = self._invoke_run(role)
             ^^^^^^^^^^^^^^^^^^^^^^
  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/elastic/agent/server/api.py", line 855, \
in _invoke_run
    time.sleep(monitor_interval)
  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/api.py", line 84, \
in _terminate_process_handler
    raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)
torch.distributed.elastic.multiprocessing.api.SignalException: Process 4242 got signal: 15""".splitlines()


def test_a_traceback_is_one_line_in_watch_and_whole_in_logs(sandbox_env, tmp_path):
    sb, home = sandbox_env, tmp_path / "home"
    proc = run_cli(["--output", "json", "launch", str(CONFIGS / "vit-base-g5.yaml"), "--platform", "ec2",
                    "--layout", "g5.xlarge:1:spot", "--yes"], home, env=sb.env)
    assert proc.returncode == 0, proc.stderr
    launched = json.loads(proc.stdout)
    job, region = launched["job_id"], launched["region"]
    # only AWS calls are announced with "calling"; the fleet's verdict is said as it is
    said = [line.strip() for line in proc.stderr.splitlines()]
    assert any(line.startswith("calling ec2:CreateFleet") for line in said)
    assert all(line.split()[1].count(":") == 1 for line in said if line.startswith("calling "))
    assert any(not line.startswith("calling ") and "g5.xlarge" in line for line in said[1:])

    host = json.loads(run_cli(["-o", "json", "watch", job, "--once"], home, env=sb.env).stdout)["hosts"][0]
    cw, group = sb.client("logs", region), f"/trainctl/{job}"
    try:
        cw.create_log_group(logGroupName=group)
    except cw.exceptions.ResourceAlreadyExistsException:
        pass
    try:
        cw.create_log_stream(logGroupName=group, logStreamName=host)
    except cw.exceptions.ResourceAlreadyExistsException:
        pass
    messages = ["trainctl step=10 loss=2.0 samples_per_s=100", *TRACEBACK, "trainctl step=11 loss=1.9 samples_per_s=101"]
    now = int(time.time() * 1000)
    cw.put_log_events(logGroupName=group, logStreamName=host,
                      logEvents=[{"timestamp": now + i, "message": m} for i, m in enumerate(messages)])
    # no agent runs on the sandbox's EC2 nodes: nothing stops itself, so no grace to wait for
    assert run_cli(["stop", job, "--grace-seconds", "0"], home, env=sb.env).returncode == 0

    watched = run_cli(["watch", job, "--interval", "0.05"], home, env={**sb.env, "COLUMNS": "100"})
    assert watched.returncode == 3, watched.stderr  # Stopped
    pane = [line for line in watched.stdout.splitlines() if host in line]
    assert [line.split(host, 1)[1].strip() for line in pane] == [
        messages[0],
        f"[traceback: {len(TRACEBACK)} lines, SignalException: Process 4242 got signal: 15; "
        f"`trainctl logs {job}` shows it]",
        messages[-1]]
    for columns in (80, 100, 200):  # the summary table fits, with the job id whole
        once = run_cli(["watch", job, "--once"], home, env={**sb.env, "COLUMNS": str(columns)})
        assert "…" not in once.stdout and max(len(line) for line in once.stdout.splitlines()) <= columns
        assert any(job in line for line in once.stdout.splitlines())
    full = run_cli(["logs", job], home, env=sb.env)
    assert [line.split(" ", 2)[2] for line in full.stdout.splitlines()] == messages
    run_cli(["down", job], home, env=sb.env)


def _lines(messages, host="algo-1"):
    return [LogLine(timestamp_ms=i, host=host, message=m) for i, m in enumerate(messages)]


def test_ranks_are_folded_apart_and_an_unfinished_traceback_is_flushed():
    shown: list[LogLine] = []
    folder = TracebackFolder("job-1", shown.append)
    rank0 = [f"[rank0]: {m}" for m in TRACEBACK]
    rank1 = [f"[rank1]: {m}" for m in TRACEBACK[:5]]
    for pair in zip(rank0, rank1 + [None] * len(rank0)):
        for ln in _lines([m for m in pair if m]):
            folder.feed(ln)
    folder.feed(LogLine(timestamp_ms=99, host="algo-2", message="Traceback (most recent call last):"))
    folder.feed(LogLine(timestamp_ms=100, host="algo-2", message="ValueError: short"))  # too short to fold
    folder.flush()
    messages = [ln.message for ln in shown]
    assert messages[0].startswith(f"[rank0]: [traceback: {len(TRACEBACK)} lines, SignalException: Process 4242")
    assert messages[1:3] == ["Traceback (most recent call last):", "ValueError: short"]
    assert messages[3] == "[rank1]: [traceback: 5 lines, unfinished; `trainctl logs job-1` shows it]"
