"""`trainctl launch`: the launch flags derive from the backends' declared options (backends/options.py);
parse, call the launch use case, render."""
from __future__ import annotations

from typing import Optional

import typer

from trainctl.backends.options import with_launch_flags
from trainctl.cli.app import OPTS, app
from trainctl.cli.app import store as _store
from trainctl.catalog.platforms import either


@app.command()
@with_launch_flags
def launch(
    spec: str = typer.Argument(..., help="Job spec YAML."),
    option: Optional[int] = typer.Option(None, "--option", min=1, help="Launch the plan's option with this rank."),
    plan_file: Optional[str] = typer.Option(None, "--plan", help="A saved `trainctl plan -o json` document."),
    layout: list[str] = typer.Option([], "--layout", help="Plan exactly TYPE:COUNT[:MARKET] (repeatable: "
                                                          "the others are failover options)."),
    platform: Optional[str] = typer.Option(None, "--platform", help=f"{either()}: launch only options of "
                                                                     "this platform."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the AWS calls a launch makes; create nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    failover: bool = typer.Option(False, "--failover", help="When capacity is refused, move to the next option."),
    allow_duplicate: bool = typer.Option(False, "--allow-duplicate",
                                         help="Launch even while an earlier job of the same spec still runs "
                                              "(otherwise launch asks, and --yes refuses)."),
    buy_capacity_block: bool = typer.Option(
        False, "--buy-capacity-block", help="Buy the chosen option's EC2 Capacity Block or SageMaker training plan and "
                                            "launch into it: its fee is charged at once and cannot be refunded (--yes "
                                            "never buys one)."),
    resume_from: Optional[str] = typer.Option(
        None, "--resume-from", metavar="JOB", help="Start from the newest checkpoints of an earlier job (one that "
                                                   "ended before its work, e.g. at its Capacity Block's or training "
                                                   "plan's end)."),
    objective: str = typer.Option("cost", "--objective", help="cost or time (when re-planning)."),
    offline: bool = typer.Option(False, "--offline", help="Plan from the bundled catalog."),
    poll_seconds: float = typer.Option(10.0, "--poll-seconds", min=0.05,
                                       help="--failover: how often to check that the job got capacity."),
    **platform_flags: Optional[str],
) -> None:
    """Launch the best option of the plan (or the one you choose).

    Shows the option, the settings the job gets and every AWS call, asks, then makes exactly those calls."""
    from trainctl.usecases.launch.launch_job import LaunchArgs
    from trainctl.usecases.launch.launch_job import launch as do_launch
    from trainctl.render import launch as shown

    args = LaunchArgs(spec_path=spec, option_rank=option, plan_path=plan_file, layouts=tuple(layout),
                      platform=platform, objective=objective, offline=offline, dry_run=dry_run, yes=yes,
                      failover=failover, allow_duplicate=allow_duplicate, poll_seconds=poll_seconds,
                      buy_capacity_block=buy_capacity_block, resume_from=resume_from,
                      platform_options=platform_flags)
    with _store() as store:
        result = do_launch(args, store, say=shown.say, show=shown.show, confirm=shown.confirm)
    shown.result(result, OPTS.output)
