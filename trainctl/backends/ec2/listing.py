"""The EC2 jobs running in a region, from AWS alone (`ls --all`): instances tagged trainctl:job that are not
terminated, one row per job."""
from __future__ import annotations

from typing import Any, Callable

from trainctl.backends.base import RunningJob
from trainctl.naming.tags import JOB_TAG


def running_jobs(client_for: Callable[[str, str], Any], region: str) -> list[RunningJob]:
    found: dict[str, RunningJob] = {}
    pages = client_for("ec2", region).get_paginator("describe_instances").paginate(Filters=[
        {"Name": "tag-key", "Values": [JOB_TAG]},
        {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}])
    for inst in (i for page in pages for r in page["Reservations"] for i in r["Instances"]):
        job = next(t["Value"] for t in inst.get("Tags", []) if t["Key"] == JOB_TAG)
        found.setdefault(job, RunningJob(job, "InProgress", inst["InstanceType"]))
    return list(found.values())
