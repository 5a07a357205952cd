"""The trainctl command line: parse, call one core function, render. No logic lives here.

Start-up must stay light: `trainctl --help` imports neither boto3 nor torch, so every heavy import
happens inside the command that needs it.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Optional

import typer

from trainctl import __version__
from trainctl.errors import TrainctlError, UsageError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None,
                  help="Plan, launch and watch deep-learning training on AWS for the fewest dollars.")


@dataclass
class GlobalOptions:
    output: str = "table"
    debug: bool = False


OPTS = GlobalOptions()


def _version(value: bool) -> None:
    if value:
        typer.echo(f"trainctl {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    profile: Optional[str] = typer.Option(None, "--profile", help="AWS profile to use."),
    region: Optional[str] = typer.Option(None, "--region", help="AWS region for calls that need one."),
    output: str = typer.Option("table", "--output", "-o", help="table or json (json: one document on stdout)."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
    sandbox: bool = typer.Option(False, "--sandbox", help="Use the local sandbox AWS (starts one if needed)."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    if output not in ("table", "json"):
        raise UsageError(f"--output {output!r}: use table or json")
    OPTS.output, OPTS.debug = output, debug
    from trainctl import aws

    aws.SETTINGS.profile, aws.SETTINGS.region = profile, region
    if sandbox:
        from trainctl.sandbox.cli import ensure_sandbox_env

        os.environ.update(ensure_sandbox_env())
        aws.reset_session()


@app.command()
def plan(
    spec: str = typer.Argument(..., help="Job spec YAML, e.g. configs/vit-base-g5.yaml."),
    objective: str = typer.Option("cost", "--objective", help="cost (lowest expected $) or time (fewest hours)."),
    layout: list[str] = typer.Option([], "--layout", help="Compare only TYPE:COUNT[:MARKET] (repeatable)."),
    platform: Optional[str] = typer.Option(None, "--platform", help="sagemaker or ec2 only."),
    offline: bool = typer.Option(False, "--offline", help="Plan from the bundled catalog; ask AWS nothing."),
    top: int = typer.Option(10, "--top", min=1, help="How many options to show (table) or return (json: all)."),
    show_excluded: bool = typer.Option(False, "--show-excluded", help="List excluded layouts and why."),
    window_hours: float = typer.Option(168.0, "--window-hours", min=1, help="Spot price history window."),
) -> None:
    """Rank training layouts by expected cost (or time) to train the job."""
    from trainctl import render
    from trainctl.planning import PlanInputs, make_plan

    _, result = make_plan(PlanInputs(spec_path=spec, objective=objective, layouts=tuple(layout),
                                     platform=platform, offline=offline, window_hours=window_hours))
    if OPTS.output == "json":
        render.print_json(result.to_json(spec, top=None))
    else:
        render.plan_table(result, spec, top=top, show_excluded=show_excluded)
    if not result.options:
        raise typer.Exit(3)


@app.command()
def catalog(
    filter: Optional[str] = typer.Argument(None, help="Substring of the instance type, e.g. g5 or 12xlarge."),
    region: str = typer.Option("us-east-1", "--region-prices", help="Region whose prices to show."),
) -> None:
    """Show the bundled catalog: specs, prices, Spot data, with sources."""
    from trainctl import render
    from trainctl.catalog import load_catalog

    cat = load_catalog()
    rows = []
    for name, inst in sorted(cat.instances.items(), key=lambda kv: (kv[1].family, kv[1].vcpus)):
        if filter and filter not in name:
            continue
        ec2 = cat.on_demand_price("ec2", region, name)
        sm = cat.on_demand_price("sagemaker", region, name)
        spot = cat.spot_advice(region, name)
        rows.append({"instance_type": name, "family": inst.family, "accelerator": inst.accelerator.key,
                     "accelerator_count": inst.accelerator_count,
                     "accelerator_memory_gib": inst.accelerator_memory_gib, "vcpus": inst.vcpus,
                     "ram_gib": inst.ram_gib, "network_gbps_baseline": inst.network_gbps_baseline,
                     "network_gbps_burst": inst.network_gbps_burst, "network_up_to": inst.network_up_to,
                     "efa_interfaces": inst.efa_interfaces, "sagemaker_training": inst.sagemaker_training,
                     "peak_tflops": inst.accelerator.peak_tflops, "region": region,
                     "ec2_usd_per_hour": ec2.usd_per_hour if ec2 else None,
                     "sagemaker_usd_per_hour": sm.usd_per_hour if sm else None,
                     "price_sources": {"ec2": ec2.source if ec2 else None, "sagemaker": sm.source if sm else None},
                     "spot_savings_pct": spot.savings_pct if spot else None,
                     "interruption_band": spot.interruption_band if spot else None, "sources": inst.sources})
    if not rows:
        raise UsageError(f"no instance type matches {filter!r}; known families: {', '.join(cat.families)}")
    if OPTS.output == "json":
        render.print_json({"catalog_date": cat.date, "data_dates": cat.data_dates, "sources": cat.sources,
                           "instances": rows})
    else:
        render.catalog_table(cat, rows, region)


@app.command()
def schema() -> None:
    """Print the job spec's JSON Schema (for editor validation)."""
    from trainctl import render
    from trainctl.spec import json_schema

    render.print_json(json_schema())


def _mount_subcommands() -> None:
    # The sandbox's own module keeps moto and boto3 out of start-up (imports happen inside its commands).
    try:
        from trainctl.sandbox.cli import app as sandbox_app
    except ImportError:
        return
    app.add_typer(sandbox_app, name="sandbox", help="A local AWS (moto plus what moto lacks) for demos and tests.")


_mount_subcommands()


def main() -> None:
    debug = "--debug" in sys.argv
    try:
        app()
    except TrainctlError as e:
        if debug:
            raise
        sys.stderr.write(f"trainctl: error: {e}\n")
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("trainctl: interrupted\n")
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 - the last line of defence: one line, not a traceback
        if debug:
            raise
        from trainctl.aws import error_summary

        sys.stderr.write(f"trainctl: error: {error_summary(e)} (run with --debug for the traceback)\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
