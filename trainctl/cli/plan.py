"""`trainctl plan`: rank a spec's layouts. Parse, call the planning use case, render."""
from __future__ import annotations

from typing import Optional

import typer

from trainctl.cli.app import OPTS, app
from trainctl.cli.app import store as _store
from trainctl.catalog.platforms import either, every


@app.command()
def plan(
    spec: str = typer.Argument(..., help="Job spec YAML, e.g. configs/vit-base-g5.yaml."),
    objective: str = typer.Option("cost", "--objective",
                                  help="cost (lowest expected $), p90-cost (lowest 90th-percentile $ over simulated "
                                       "Spot runs) or time (fewest hours)."),
    layout: list[str] = typer.Option([], "--layout", help="Compare only TYPE:COUNT[:MARKET] (repeatable)."),
    platform: Optional[str] = typer.Option(None, "--platform", help=f"{either()}: only that platform's options "
                                                                     f"(default: {every()})."),
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
