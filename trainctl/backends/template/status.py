"""What `watch` and `logs` read: the job as a JobView (SageMaker's status words: InProgress, Completed, Failed,
Stopping, Stopped) and its log lines, every host in time order (tail them with backends/logtail.py)."""
from __future__ import annotations

from typing import Any, Callable

from trainctl.backends.base import JobView, LogLine
from trainctl.backends.template.missing import missing


def describe(client_for: Callable[[str, str], Any], job_id: str, region: str) -> JobView:
    raise missing("status.describe", "the job's JobView; a job AWS does not know is a TrainctlError")


def logs(client_for: Callable[[str, str], Any], job_id: str, region: str,
         cursor: dict | None) -> tuple[list[LogLine], dict]:
    raise missing("status.logs", "the log lines since `cursor`, in time order, and the next cursor")
