"""`trainctl cost`: a job's dollars as predicted, running and billed. Parse, call one use case, render."""
from __future__ import annotations

from typing import Optional

import typer

from trainctl.cli.app import OPTS, app
from trainctl.cli.app import store as _store


@app.command()
def cost(
    job: Optional[str] = typer.Argument(None, help="One job id (default: every job, or those the options pick)."),
    spec: Optional[str] = typer.Option(None, "--spec", help="Only the jobs of the spec of this name."),
    since: Optional[str] = typer.Option(None, "--since", help="Only the jobs launched since this day (YYYY-MM-DD, "
                                                              "UTC)."),
    group_by: str = typer.Option("job", "--group-by", help="job, spec, user or day: one row per each."),
    compare: bool = typer.Option(False, "--compare", help="Also the error of the plan's dollars against the billed "
                                                          "ones, per job and in all."),
) -> None:
    """Show each job's dollars: predicted, running and billed.

    Billed is Cost Explorer's figure for the job's trainctl:job cost allocation tag: it lags up to a day."""
    from trainctl import render
    from trainctl.render.cost import cost_table
    from trainctl.usecases.jobs.cost import report

    with _store() as store:
        doc = report(store, job=job, spec=spec, since=since, group_by=group_by, with_compare=compare)
    if OPTS.output == "json":
        render.print_json(doc)
    else:
        cost_table(doc)
    for warning in doc["warnings"]:
        render.stderr_console().print(f"warning: {warning}", markup=False, soft_wrap=True)
