"""`trainctl fetch JOB`: what a job produced (its model, TensorBoard events, logs or checkpoints), downloaded."""
from __future__ import annotations

from typing import Optional

import typer

from trainctl.cli.app import OPTS, app
from trainctl.cli.app import store as _store
from trainctl.catalog.platforms import either


@app.command()
def fetch(
    job: str = typer.Argument(..., help="Job id."),
    dest: Optional[str] = typer.Argument(None, help="Folder to download into (default ./JOB-WHAT)."),
    what: str = typer.Option("model", "--what", help="model (what the job wrote to $SM_MODEL_DIR), tensorboard, "
                                                     "logs or checkpoints."),
    bucket: Optional[str] = typer.Option(None, "--bucket", help="The job bucket, if the launch was given one."),
    platform: Optional[str] = typer.Option(None, "--platform", help=f"{either()}: for a job trainctl did not "
                                                                    "launch; --region names its region."),
    max_gib: float = typer.Option(100.0, "--max-gib", help="The most fetch writes, in GiB (checked before "
                                                           "writing, with the free space)."),
) -> None:
    """Download what a job produced: model, events, logs.

    --what model (the files the job wrote to $SM_MODEL_DIR), tensorboard, logs or checkpoints."""
    from trainctl import render
    from trainctl.usecases.jobs import fetch as f
    from trainctl.usecases.jobs.watch import locate

    with _store() as store:
        ref = locate(store, job, platform)
    got = f.fetch(ref, what, dest, bucket, max_gib)
    for why in got.skipped[:20]:  # names already made printable (fetch_files.shown)
        render.stderr_console().print(f"warning: not written: {why}", markup=False, soft_wrap=True)
    if len(got.skipped) > 20:
        render.stderr_console().print(f"warning: {len(got.skipped) - 20} more not written", markup=False)
    if OPTS.output == "json":
        render.print_json({"job_id": job, "what": got.what, "source": got.source, "dest": got.dest,
                           "files": got.files, "bytes": got.size, "skipped": list(got.skipped)})
    else:
        typer.echo(f"{got.what}: {got.files} files, {got.size} bytes written from {got.source} to {got.dest}"
                   + (f" ({len(got.skipped)} refused, named above)" if got.skipped else ""))
