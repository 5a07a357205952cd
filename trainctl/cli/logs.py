"""`trainctl logs JOB`: a job's log lines, all hosts in time order, in full (or followed)."""
from __future__ import annotations

from typing import Optional

import typer

from trainctl.cli.app import PLATFORM_OF_UNKNOWN_JOB, app
from trainctl.cli.app import store as _store


@app.command()
def logs(
    job: str = typer.Argument(..., help="Job id."),
    host: Optional[int] = typer.Option(None, "--host", min=1, help="Only host N (1-based)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the job ends."),
    interval: float = typer.Option(2.0, "--interval", min=0.05, help="--follow: seconds between polls."),
    platform: Optional[str] = PLATFORM_OF_UNKNOWN_JOB,
) -> None:
    """Print a job's log lines, all hosts in time order, in full."""
    from trainctl.usecases.jobs import watch as w
    from trainctl.backends import get_backend
    from trainctl.render.watch import log_line, say
    from trainctl.usecases.jobs.transient import patiently

    with _store() as store:
        ref = w.locate(store, job, platform)
    backend = get_backend(ref.platform)
    only = w.check_host(patiently(lambda: backend.describe(job, ref.region), job, interval, say), host)

    def show(ln) -> None:
        if only is None or ln.host == only:
            typer.echo(log_line(ln, with_host=only is None))

    if follow:
        w.follow(backend, job, ref.region, interval=interval, on_line=show, say=say)
    else:
        for ln in w.read_all(backend, job, ref.region, say=say, interval=interval)[2]:
            show(ln)
