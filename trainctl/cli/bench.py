"""`trainctl bench`: measure the user's own model on the layouts where it could change the choice. Parse, call
the use case (usecases/bench/measure.py), render."""
from __future__ import annotations

from typing import Optional

import typer

from trainctl.cli.app import OPTS, app
from trainctl.cli.app import store as _store
from trainctl.catalog.platforms import either


@app.command()
def bench(
    spec: str = typer.Argument(..., help="Job spec YAML, e.g. configs/vit-base-g5.yaml."),
    top: Optional[int] = typer.Option(None, "--top", min=1, help="Measure the first N layouts of the plan "
                                                                 "(default: those whose band could change the top)."),
    layout: list[str] = typer.Option([], "--layout", help="Measure TYPE:COUNT[:MARKET] (repeatable)."),
    max_usd: Optional[float] = typer.Option(None, "--max-usd", min=0, help="Cap on the whole bench's dollar bound "
                                            "(default: min(5% of the top option's expected cost, $25))."),
    max_minutes: float = typer.Option(15.0, "--max-minutes", min=1.2, help="Hard maximum runtime of each bench job "
                                                                           "(the platform stops it)."),
    steps: int = typer.Option(40, "--steps", min=1, help="Measured steps per layout."),
    warmup_steps: int = typer.Option(20, "--warmup-steps", min=0, help="Steps not counted (start-up)."),
    objective: str = typer.Option("cost", "--objective", help="cost, p90-cost or time (as plan)."),
    platform: Optional[str] = typer.Option(None, "--platform", help=f"{either()} only."),
    offline: bool = typer.Option(False, "--offline", help="Plan from the bundled catalog."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what it would launch, for how long and its dollar "
                                                          "bound; launch nothing."),
    interval: float = typer.Option(2.0, "--interval", min=0.05, help="Seconds between polls of a bench job."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before spending (the bench's dollar bound)."),
) -> None:
    """Measure the layouts that could change the plan's choice.

    Samples/s of your model, for a bounded number of dollars: the launch's checks run first, then it asks
    (--yes: it does not). Each bench job runs your entrypoint with its arguments for warm-up + measured steps under a hard maximum
    runtime and is taken down afterwards (Ctrl-C takes down what runs); later plans use the measurement."""
    from trainctl import render
    from trainctl.render.bench import bench_table, confirm
    from trainctl.render.watch import say
    from trainctl.usecases.bench.measure import BenchInputs, bench as run_bench

    inputs = BenchInputs(spec_path=spec, objective=objective, platform=platform, offline=offline, top=top,
                         layouts=tuple(layout), max_usd=max_usd, max_minutes=max_minutes, steps=steps,
                         warmup_steps=warmup_steps, dry_run=dry_run, interval=interval, yes=yes)
    with _store() as store:
        doc = run_bench(inputs, store, say, confirm)
    if OPTS.output == "json":
        render.print_json(doc)
    else:
        bench_table(doc)
    if not doc.get("dry_run") and doc["layouts"] and not any(r.get("measured_samples_per_s") for r in doc["layouts"]):
        raise typer.Exit(1)  # launched, but nothing measured: each row's note says why
