"""`trainctl ls [--all]`: the jobs launched here (usecases/jobs/listing.py), or the account's (--all:
usecases/jobs/account_listing.py), with their live status."""
from __future__ import annotations

import typer

from trainctl.cli.app import OPTS, app
from trainctl.cli.app import store as _store


@app.command("ls")
def list_jobs(
    limit: int = typer.Option(20, "--limit", min=1, help="Newest N jobs."),
    no_status: bool = typer.Option(False, "--no-status", help="Do not ask AWS for live status."),
    all_on_aws: bool = typer.Option(False, "--all", help="The account's trainctl jobs in the region, whoever "
                                                         "launched them (from AWS: tags and the job records)."),
) -> None:
    """List the jobs launched here, with their live status."""
    from trainctl import render
    from trainctl.render.watch import jobs_table
    from trainctl.state.job_store import BrokenStore
    from trainctl.usecases.jobs.listing import list_jobs as list_jobs_of

    notes: list[str] = []
    with _store() as store:
        try:
            out = list_jobs_of(store, limit, live=not no_status, notes=notes)
        except BrokenStore as e:
            if not all_on_aws:
                raise
            notes.append(str(e))
            out = []
        if all_on_aws:
            from trainctl.usecases.jobs.account_listing import list_account_jobs

            found, aws_notes = list_account_jobs(store, limit)
            listed = {j["job_id"] for j in found}
            out = found + [j for j in out if j["job_id"] not in listed]
            notes += aws_notes
    from trainctl.render.watch import say

    for note in notes:  # on stderr in both modes; the JSON document carries them too
        say(f"trainctl: warning: {note}")
    if OPTS.output == "json":
        render.print_json({"jobs": out, "warnings": notes})
    else:
        jobs_table(out)
