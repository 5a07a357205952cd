"""`trainctl down JOB`: parse, call the down use case (usecases/jobs/down.py), render what was removed."""
from __future__ import annotations

from typing import Optional

import typer

from trainctl.cli.app import OPTS, PLATFORM_OF_UNKNOWN_JOB, app
from trainctl.cli.app import store as _store


@app.command()
def down(job: str = typer.Argument(..., help="Job id."), platform: Optional[str] = PLATFORM_OF_UNKNOWN_JOB) -> None:
    """Delete every resource tagged for a job (safe to repeat).

    Instances, fleet, launch template, placement group, security groups, role; S3 output stays."""
    from trainctl import render
    from trainctl.errors import TrainctlError
    from trainctl.render.watch import removed_lines
    from trainctl.usecases.jobs.down import down as down_job

    with _store() as store:
        done = down_job(store, job, platform)
    if OPTS.output == "json":
        render.print_json(done.to_json())
    else:
        removed_lines(job, done.region, done.removed)
    if done.problem:  # what AWS did is said first: the record is what failed
        raise TrainctlError(f"{job}: removed {len(done.removed)} resources, but could not record it: "
                            f"{done.problem}")
