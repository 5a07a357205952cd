"""`trainctl stop`: the job checkpoints first, then ends; a grace the platform cannot honour is a UsageError."""
from __future__ import annotations

from typing import Any, Callable

from trainctl.backends.template.missing import missing


def stop(client_for: Callable[[str, str], Any], job_id: str, region: str, grace_s: float | None,
         say: Callable[[str], None] | None) -> dict:
    raise missing("stopping.stop", "stop the job so that it checkpoints; return what was done (\"ended\": the "
                                   "status of a job that had already ended)")
