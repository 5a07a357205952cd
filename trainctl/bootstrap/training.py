"""One run of the training process (torchrun and its ranks) on a node: its output shipped line by line, the tail
of its stderr kept for the failure reason, and a stop that cannot be ignored.

A stop (Spot notice, stop mark, budget, maximum runtime, a failed peer) SIGTERMs the ranks, as SageMaker's
StopTrainingJob and a Spot interruption do; the script checkpoints and exits. A script that is still running
`grace_s` later (SageMaker gives 120 s before SIGKILL) is killed with its whole process group (torchrun runs in a
session of its own), so no limit depends on the script honouring SIGTERM.
Standard library only, as the agent.
"""
from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import threading
import time

from .node_io import children

TAIL_LINES = 20
# torchrun's tee (--redirects 2 --tee 2, launch_command.py) prefixes each rank's stderr line with [<role><local
# rank>]: those lines are the script's own; torchrun's (its ChildFailedError dump) are not.
RANK_LINE = re.compile(r"^\[[A-Za-z_]*\d+\]:(.*)$")
FAILURE_CHARS = 1024  # SageMaker's FailureReason holds at most 1,024 characters (DescribeTrainingJob)
# After a stop, once the ranks are gone: how long torchrun may wait at its exit barrier for the other nodes' torchrun.
# A node whose rank the SIGTERM found already exiting reports a failure and skips the barrier, and the others would
# wait there for torchrun's 300 s; the agent decides the run's outcome itself, so the barrier is worth no more.
EXIT_BARRIER_GRACE_S = 10.0


class Training:
    def __init__(self, cmd: list[str], env: dict[str, str], cwd: str, log):
        self.log = log
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)       # the ranks' stderr
        self.other: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)      # torchrun's
        self.killed = threading.Event()
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, bufsize=1, errors="replace", start_new_session=True)
        self.readers = [threading.Thread(target=self._read, args=(self.proc.stdout, False), daemon=True),
                        threading.Thread(target=self._read, args=(self.proc.stderr, True), daemon=True)]
        for reader in self.readers:
            reader.start()
        self._stop_once = threading.Lock()
        self._stopping = False

    def _read(self, stream, is_stderr: bool) -> None:
        for line in stream:
            line = line.rstrip("\n")
            if is_stderr:
                rank_line = RANK_LINE.match(line)
                (self.tail.append(rank_line.group(1)) if rank_line else self.other.append(line))
            self.log(line)

    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace_s: float) -> None:
        """SIGTERM the ranks (not torchrun: it would die without meeting the other nodes' torchrun at its exit
        barrier); SIGKILL the process group if it is still there after grace_s."""
        with self._stop_once:
            if self._stopping or not self.running():
                return
            self._stopping = True
        for pid in children(self.proc.pid) or [self.proc.pid]:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        threading.Thread(target=self._kill_after, args=(grace_s,), daemon=True).start()
        threading.Thread(target=self._end_after_ranks, daemon=True).start()

    def _end_after_ranks(self) -> None:
        """SIGTERM torchrun if it outlives its ranks by EXIT_BARRIER_GRACE_S (its exit barrier, see above)."""
        gone_since = None
        while self.running():
            if children(self.proc.pid):
                gone_since = None
            elif gone_since is None:
                gone_since = time.monotonic()
            elif time.monotonic() - gone_since >= EXIT_BARRIER_GRACE_S:
                self.log("trainctl-agent: the ranks have exited; not waiting for the other nodes' torchrun")
                try:
                    os.kill(self.proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                return
            time.sleep(0.5)

    def _kill_after(self, grace_s: float) -> None:
        try:
            self.proc.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            pass
        self.log(f"trainctl-agent: the training did not exit within {grace_s:.0f} s of SIGTERM; killing it")
        self.killed.set()
        # torchrun starts each rank in a session of its own, so torchrun's group alone misses them: every process
        # of the tree, found before any dies (an orphan's parent is no longer torchrun), and each one's group
        tree, todo = [self.proc.pid], [self.proc.pid]
        while todo:
            found = children(todo.pop())
            tree += found
            todo += found
        for pid in tree:
            for kill in (lambda p: os.killpg(os.getpgid(p), signal.SIGKILL), lambda p: os.kill(p, signal.SIGKILL)):
                try:
                    kill(pid)
                except (ProcessLookupError, PermissionError):
                    pass

    def wait(self) -> int:
        rc = self.proc.wait()
        for reader in self.readers:
            reader.join(timeout=10)
        return rc

    def failure_reason(self, failure_file: str, rc: int, where: str) -> str:
        """SageMaker's way: /opt/ml/output/failure when the script wrote one, else the tail of its stderr."""
        text = ""
        try:
            with open(failure_file, errors="replace") as f:
                text = f.read(FAILURE_CHARS).strip()
        except OSError:
            pass
        if not text:
            text = "\n".join(self.tail or self.other).strip() or "(no output on stderr)"
        head = f"AlgorithmError: the script exited {rc} on {where}: "
        room = FAILURE_CHARS - len(head)
        return head + (text if len(text) <= room else "..." + text[-(room - 3):])
