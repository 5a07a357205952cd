"""The trainctl app and its global options (`-o/--output`, `--profile`, `--region`, `--debug`, `--sandbox`),
shared by the command modules (one per command: plan.py, launch.py, watch.py, ...). Start-up stays light: nothing heavy is
imported here."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import typer

from trainctl import __version__
from trainctl.errors import UsageError
from trainctl.cli.plugins import sandbox_environment
from trainctl.catalog.platforms import either

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None,
                  help="Plan, launch and watch deep-learning training on AWS for the fewest dollars.")


@dataclass
class GlobalOptions:
    output: str = "table"
    debug: bool = False


OPTS = GlobalOptions()
# `--platform` of the commands about one job (watch, logs, stop, down)
PLATFORM_OF_UNKNOWN_JOB = typer.Option(None, "--platform", help=f"{either()}: for a job trainctl did not "
                                                                 "launch (it is not in `trainctl ls`); --region "
                                                                 "names its region.")
# Options that work before AND after the subcommand, as in the AWS CLI and kubectl: declared once (on the
# group below) and attached to every command by `attach_global_options`; the later value wins.
GLOBAL_OPTIONS = ("profile", "region", "output", "debug", "sandbox")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"trainctl {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    profile: Optional[str] = typer.Option(None, "--profile", help="AWS profile to use."),
    region: Optional[str] = typer.Option(None, "--region", help="AWS region: for calls that need one, and the one region `plan`, `launch` and `doctor` plan in (instead of the spec's candidates.regions)."),
    output: str = typer.Option("table", "--output", "-o", help="table or json (json: one document on stdout)."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
    sandbox: bool = typer.Option(False, "--sandbox", help="Use the local sandbox AWS (starts one if needed)."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    for name, value in (("output", output), ("profile", profile), ("region", region), ("debug", debug),
                        ("sandbox", sandbox)):
        if value or name == "output":
            apply_global_option(name, value)


def apply_global_option(name: str, value) -> None:
    """Put one global option into effect (before or after the subcommand: the later one wins)."""
    from trainctl.aws import clients as aws

    if name == "output":
        if value not in ("table", "json"):
            raise UsageError(f"--output {value!r}: use table or json")
        OPTS.output = value
    elif name == "debug":
        OPTS.debug = bool(value)
    elif name == "profile":
        aws.SETTINGS.profile = value
        aws.reset_session()
    elif name == "region":
        from trainctl.catalog.regions import check_region

        aws.SETTINGS.region = check_region(value)
        aws.reset_session()
    elif name == "sandbox" and value:
        _use_sandbox()


def _use_sandbox() -> None:
    from trainctl.aws import clients as aws

    # through the sandbox plugin (trainctl/cli/plugins.py); one line when it is not installed
    os.environ.update(sandbox_environment())
    aws.reset_session()


def store():
    """The command's one connection to the job store (closed when the command ends)."""
    from trainctl.state.job_store import JobStore

    return JobStore()
