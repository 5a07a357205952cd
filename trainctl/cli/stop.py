"""`trainctl stop JOB`: parse, call the stop use case (usecases/jobs/stop.py), say what happens next."""
from __future__ import annotations

from typing import Optional

import typer

from trainctl.cli.app import OPTS, PLATFORM_OF_UNKNOWN_JOB, app
from trainctl.cli.app import store as _store


@app.command()
def stop(
    job: str = typer.Argument(..., help="Job id."),
    grace_seconds: Optional[float] = typer.Option(
        None, "--grace-seconds", min=0, help="EC2: seconds the nodes get after the stop mark to checkpoint, upload "
                                             "and shut down before the rest are terminated (default 180: a Spot "
                                             "notice's two minutes plus the agent's 30 s poll and the shutdown; "
                                             "0: at once). SageMaker gives its own 120 s."),
    platform: Optional[str] = PLATFORM_OF_UNKNOWN_JOB,
) -> None:
    """Stop a running job (it checkpoints first).

    EC2: the stop mark, then the nodes checkpoint, upload and shut down; the ones left are terminated after
    the grace. SageMaker: StopTrainingJob (SIGTERM; the entrypoint checkpoints, the model is still uploaded)."""
    from trainctl import render
    from trainctl.render.watch import say
    from trainctl.usecases.jobs.stop import stop as stop_job

    with _store() as store:
        doc = stop_job(store, job, platform, grace_seconds, say)
    if doc.get("ended"):  # nothing to stop: say so and exit 0
        render.print_json(doc) if OPTS.output == "json" else say(f"{job} already ended ({doc['ended']}); "
                                                                  f"nothing to stop; `trainctl down {job}` "
                                                                  "removes what it leaves")
        return
    if OPTS.output == "json":
        render.print_json(doc)
    say(f"stopping {job}; `trainctl watch {job}` follows it to the end")
