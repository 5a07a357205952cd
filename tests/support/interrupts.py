"""Ctrl-C at a chosen AWS call of a launch (a sandbox latency switch holds that call; SIGINT arrives while it is
in flight) and what the interrupted launch must say: shared by the launch tier's interrupt tests."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.helpers import ROOT, clean_env

SPEC = str(Path(__file__).parent / "launch_specs" / "tiny-vit-sagemaker.yaml")
LATENCY_MS = 4000


def count(sandbox, operation: str) -> int:
    return sum(c["count"] for c in sandbox.admin.call_log() if c["operation"] == operation)


def interrupt_launch_at(sandbox, home: Path, args: list[str], operation: str) -> subprocess.CompletedProcess:
    before = count(sandbox, operation)
    sandbox.admin.set_latency(operation, LATENCY_MS)
    proc = subprocess.Popen([sys.executable, "-m", "trainctl.cli", "launch", *args, "--yes"], cwd=ROOT,
                            env=clean_env(home, sandbox.env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        while count(sandbox, operation) == before:  # until the call reaches the sandbox (pytest-timeout bounds it)
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        sandbox.admin.set_latency(operation, 0)
    while sandbox.admin.calls_in_flight() > 0:  # the sandbox finishes the call the client gave up on
        time.sleep(0.02)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def unwrapped(text: str) -> str:
    """The text with its line wraps undone: trainctl wraps progress lines at the terminal's width (80 without one)
    between words, so a command it names may span two lines."""
    return " ".join(text.split())


def job_of(stderr: str) -> str | None:
    m = re.search(r"^(\S+): option \d+:", stderr, re.M)
    return m.group(1) if m else None


def check_interrupted(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 130, (proc.returncode, proc.stderr)
    assert proc.stderr.strip().splitlines()[-1:] == ["trainctl: interrupted"], (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr


