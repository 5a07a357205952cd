"""The planning commands: plan, catalog, schema and launch. Parse, call one use case, render.

Start-up must stay light: `trainctl --help` imports neither boto3 nor torch, so every heavy import
happens inside the command that needs it.
"""
from __future__ import annotations

from typing import Optional

import typer

from trainctl.backends.options import with_launch_flags
from trainctl.cli.app import OPTS, app
from trainctl.cli.app import store as _store
from trainctl.errors import UsageError


@app.command()
def plan(
    spec: str = typer.Argument(..., help="Job spec YAML, e.g. configs/vit-base-g5.yaml."),
    objective: str = typer.Option("cost", "--objective",
                                  help="cost (lowest expected $), p90-cost (lowest 90th-percentile $ over simulated "
                                       "Spot runs) or time (fewest hours)."),
    layout: list[str] = typer.Option([], "--layout", help="Compare only TYPE:COUNT[:MARKET] (repeatable)."),
    platform: Optional[str] = typer.Option(None, "--platform", help="sagemaker or ec2: only that platform's options "
                                                                     "(default: both)."),
    offline: bool = typer.Option(False, "--offline", help="Plan from the bundled catalog; ask AWS nothing."),
    top: int = typer.Option(10, "--top", min=1, help="How many options to show (table) or return (json: all)."),
    show_excluded: bool = typer.Option(False, "--show-excluded", help="List excluded layouts and why."),
    window_hours: float = typer.Option(168.0, "--window-hours", min=1, help="Spot price history window."),
    plot: bool = typer.Option(False, "--plot", help="Draw expected cost against hours, the Pareto front marked."),
    refresh: bool = typer.Option(False, "--refresh", help="Ask AWS again instead of using answers cached in the last "
                                                          "TRAINCTL_CACHE_TTL seconds (after raising a quota)."),
    explain: bool = typer.Option(False, "--explain", "-v", help="Under the table, why each shown option ranks where "
                                                               "it does, and every warning whole."),
) -> None:
    """Rank training layouts by expected cost, p90 cost or time.

    Every valid layout with its hours, dollars and why; --plot draws cost against hours."""
    from trainctl import render
    from trainctl.usecases.plan import PlanInputs, make_plan

    with _store() as store:
        _, result = make_plan(PlanInputs(spec_path=spec, objective=objective, layouts=tuple(layout),
                                         platform=platform, offline=offline, window_hours=window_hours,
                                         refresh=refresh), store)
    if OPTS.output == "json":
        render.print_json(result.model_dump(mode="json"))
    elif plot and result.options:
        from trainctl.render.plot import print_plot

        print_plot(result, spec)
    else:
        from trainctl.render.tables import plan_table

        plan_table(result, spec, top=top, show_excluded=show_excluded, explain=explain)
    if not result.options:
        raise typer.Exit(3)


@app.command()
def catalog(
    filter: Optional[str] = typer.Argument(None, help="Substring of the instance type, e.g. g5 or 12xlarge."),
    region: str = typer.Option("us-east-1", "--region-prices", help="Region whose prices to show."),
) -> None:
    """Show the catalog: specs, prices, Spot data and sources."""
    from trainctl import render
    from trainctl.catalog import load_catalog
    from trainctl.render.tables import catalog_rows, catalog_table, image_rows

    cat = load_catalog()
    rows = catalog_rows(cat, filter, region)
    if not rows:
        raise UsageError(f"no instance type matches {filter!r}; known families: {', '.join(cat.families)}")
    if OPTS.output == "json":
        render.print_json({"catalog_date": cat.date, "data_dates": cat.data_dates, "sources": cat.sources,
                           "instances": rows, "images": image_rows()})
    else:
        catalog_table(cat, rows, region)


@app.command()
def schema(
    plan_schema: bool = typer.Option(False, "--plan", help="The plan document's schema (`plan -o json`, "
                                                          "`launch --plan`) instead of the job spec's."),
) -> None:
    """Print the job spec's JSON Schema (or the plan's: --plan)."""
    from trainctl import render

    if plan_schema:
        from trainctl.plans import plan_schema as schema_of_plan

        render.print_json(schema_of_plan())
    else:
        from trainctl.spec import json_schema

        render.print_json(json_schema())


@app.command()
@with_launch_flags
def launch(
    spec: str = typer.Argument(..., help="Job spec YAML."),
    option: Optional[int] = typer.Option(None, "--option", min=1, help="Launch the plan's option with this rank."),
    plan_file: Optional[str] = typer.Option(None, "--plan", help="A saved `trainctl plan -o json` document."),
    layout: list[str] = typer.Option([], "--layout", help="Plan exactly TYPE:COUNT[:MARKET] (repeatable: "
                                                          "the others are failover options)."),
    platform: Optional[str] = typer.Option(None, "--platform", help="sagemaker or ec2: launch only options of "
                                                                     "this platform."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the AWS calls a launch makes; create nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    failover: bool = typer.Option(False, "--failover", help="When capacity is refused, move to the next option."),
    allow_duplicate: bool = typer.Option(False, "--allow-duplicate",
                                         help="Launch even while an earlier job of the same spec still runs "
                                              "(otherwise launch asks, and --yes refuses)."),
    objective: str = typer.Option("cost", "--objective", help="cost or time (when re-planning)."),
    offline: bool = typer.Option(False, "--offline", help="Plan from the bundled catalog."),
    poll_seconds: float = typer.Option(10.0, "--poll-seconds", min=0.05,
                                       help="--failover: how often to check that the job got capacity."),
    **platform_flags: Optional[str],
) -> None:
    """Launch the best option of the plan (or the one you choose).

    Shows the option, the settings the job gets and every AWS call, asks, then makes exactly those calls."""
    from trainctl.usecases.launch import LaunchArgs
    from trainctl.usecases.launch import launch as do_launch
    from trainctl.render import launch as shown

    args = LaunchArgs(spec_path=spec, option_rank=option, plan_path=plan_file, layouts=tuple(layout),
                      platform=platform, objective=objective, offline=offline, dry_run=dry_run, yes=yes,
                      failover=failover, allow_duplicate=allow_duplicate, poll_seconds=poll_seconds,
                      platform_options=platform_flags)
    with _store() as store:
        result = do_launch(args, store, say=shown.say, show=shown.show, confirm=shown.confirm)
    shown.result(result, OPTS.output)
