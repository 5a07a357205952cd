"""What a sandbox SageMaker job's hosts print: each line to the host's CloudWatch log stream and a local
file, the step counter that `interrupt_training_job --at-step` waits for, and the failure reason that
DescribeTrainingJob reports when a host fails (as the SageMaker toolkit words it)."""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import IO, Callable

from trainctl_sandbox.sagemaker.container import Host
from trainctl_sandbox.sagemaker.storage import MotoLogs

MAX_EVENT_BYTES = 256 * 1024 - 26  # CloudWatch's limit on one event (message bytes + 26)
STEP_RE = re.compile(r"\btrainctl step=(\d+)")
# A line that names an error, e.g. "ValueError: boom" (torchrun prefixes a rank's lines with
# "[rank1]: "); torchrun's own summary lines are not the cause.
_RANK_PREFIX_RE = re.compile(r"^\[(?:default)?rank\d+\]:\s?")
_ERROR_LINE_RE = re.compile(r"^\s*([A-Za-z_][\w.]*)?(Error|Exception|Interrupt|Exit)\b")
_NOT_CAUSE_RE = re.compile(r"ChildFailedError|torch\.distributed\.elastic|^\s*raise\b")
_DECORATION_RE = re.compile(r"^[\s=\-*#_]*$")


def pump(host: Host, pipe: IO[bytes], is_err: bool, logs: MotoLogs, local: Path,
         on_step: Callable[[int], None]) -> None:
    """One host's stdout or stderr -> its log stream, the local file, and `on_step` for step lines."""
    local.parent.mkdir(parents=True, exist_ok=True)
    with pipe, open(local, "a", encoding="utf-8") as out:
        for raw in iter(pipe.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            message = line
            if len(line) > MAX_EVENT_BYTES // 4:  # only a long line can be too many bytes
                message = line.encode()[:MAX_EVENT_BYTES].decode("utf-8", "ignore")
            logs.put(host.stream, message, time.time())
            out.write(line + "\n")
            out.flush()
            text = _RANK_PREFIX_RE.sub("", line).strip()
            if is_err and text and not _DECORATION_RE.match(text):
                host.last_stderr = text
                if _ERROR_LINE_RE.match(text) and not _NOT_CAUSE_RE.search(text):
                    host.last_error = text
            m = STEP_RE.search(line)
            if m:
                on_step(int(m.group(1)))


def algorithm_error(host: Host) -> str:
    """FailureReason of a job whose host failed: its output/failure file, else its last error line."""
    failure_file = host.base / "output" / "failure"
    code = host.proc.returncode if host.proc else None
    if failure_file.is_file() and failure_file.read_text(errors="replace").strip():
        return "AlgorithmError: " + failure_file.read_text(errors="replace").strip()
    message = host.last_error or host.last_stderr or f"exit code {code}"
    return (f"AlgorithmError: ExecuteUserScriptError:\nExitCode {code}\n"
            f"ErrorMessage \"{message}\"\nCommand \"{host.command}\", exit code: {code}")
