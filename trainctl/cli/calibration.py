"""`trainctl calibration`: the model's throughput against what jobs measured (usecases/calibration.py)."""
from __future__ import annotations

from typing import Optional

import typer

from trainctl.cli.app import OPTS, app
from trainctl.cli.app import store as _store


@app.command()
def calibration(
    account: Optional[str] = typer.Option(None, "--account", help="Only the jobs this AWS account launched."),
    forget: Optional[str] = typer.Option(None, "--forget", help="Remove the throughput measured by job JOB: "
                                                                "later plans no longer use it.", metavar="JOB"),
    accept: Optional[str] = typer.Option(None, "--accept", help="Use the throughput measured by job JOB even where "
                                                                "plans quarantine it (above the hardware's peak).",
                                         metavar="JOB"),
) -> None:
    """Compare the model's throughput with what jobs measured.

    Per completed job: the prediction stored at launch, the measured rate and the error, then a summary."""
    from trainctl import render
    from trainctl.usecases.calibration import report
    from trainctl.render.calibration import calibration_table

    if forget is not None or accept is not None:
        from trainctl.render.watch import say
        from trainctl.usecases.calibration import accept as accept_job
        from trainctl.usecases.calibration import forget as forget_job
        from trainctl.usecases.jobs.watch import check_job_id

        with _store() as store:
            said = forget_job(store, check_job_id(forget)) if forget else accept_job(store, check_job_id(accept))
        if OPTS.output == "json":
            render.print_json({"job_id": forget or accept, "forgotten" if forget else "accepted": said})
        say(said)
        return
    with _store() as store:
        doc = report(store, account)
    if OPTS.output == "json":
        render.print_json(doc)
    else:
        calibration_table(doc)
