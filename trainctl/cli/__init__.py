"""The trainctl command line: typer commands and the global options; parse, call one use case, render. No
logic lives here.

Start-up must stay light: `trainctl --help` imports neither boto3, pydantic nor torch, so every heavy import
happens inside the command that needs it. `app` (the typer app and the global options every command shares),
`global_options` (attached to every command so they work before and after it; every error as one line), one
module per command, named after it (`plan`, `catalog`, `schema`, `launch`, `watch`, `logs`, `ls`, `calibration`,
`stop`, `down`, `fetch`, `doctor`, `iam_policy`, `cost`, `bench`), `plugins` (the sandbox's commands, found
through an entry point only when used).
"""
from __future__ import annotations

import typer

# the commands register on `app` when imported, in the order --help lists them
from trainctl.cli import plan, catalog, schema, launch  # noqa: F401,I001
from trainctl.cli import watch, logs, ls, calibration, stop, down, fetch  # noqa: F401,I001
from trainctl.cli import doctor, iam_policy, cost, bench  # noqa: F401,I001
from trainctl.cli.app import GLOBAL_OPTIONS, apply_global_option, app, OPTS
from trainctl.cli.global_options import attach_global_options, run
from trainctl.cli.plugins import SANDBOX, SandboxGroup

# `trainctl sandbox`: the trainctl-sandbox distribution's commands, found through its entry point only
# when used (cli/plugins.py), so start-up reads no distribution metadata and imports no sandbox code.
app.add_typer(typer.Typer(), name=SANDBOX.name, cls=SandboxGroup, help=SANDBOX.help, no_args_is_help=True)

__all__ = ["app", "main"]


def main() -> None:
    command = typer.main.get_command(app)
    attach_global_options(command, GLOBAL_OPTIONS, apply_global_option)
    run(command, debug=lambda: OPTS.debug)
