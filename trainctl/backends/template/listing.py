"""What `ls --all` and `fetch` ask of the platform: the jobs running under trainctl's tag, from AWS alone, and
where a job's model lands in its job bucket (naming/bucket.py's layout)."""
from __future__ import annotations

from typing import Any, Callable

from trainctl.backends.base import RunningJob
from trainctl.backends.template.missing import missing


def running_jobs(client_for: Callable[[str, str], Any], region: str) -> list[RunningJob]:
    raise missing("listing.running_jobs", "the jobs running in the region under the trainctl:job tag")


def model_output(bucket: str, job_id: str) -> str:
    raise missing("listing.model_output", "the S3 URI under which the job's model lands")
