"""`trainctl down`: everything tagged trainctl:job=JOB (found by the tag, never by remembered ids) is deleted;
safe to repeat; the job's S3 output stays."""
from __future__ import annotations

from typing import Any, Callable

from trainctl.backends.template.missing import missing


def cleanup(client_for: Callable[[str, str], Any], job_id: str, region: str) -> list[str]:
    raise missing("cleanup.cleanup", "delete what is tagged for the job; return what was removed")
