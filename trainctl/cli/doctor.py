"""`trainctl doctor [SPEC]`: can this account and region launch the spec (usecases/doctor/)."""
from __future__ import annotations

from typing import Optional

import typer

from trainctl.cli.app import OPTS, app
from trainctl.catalog.platforms import either, every


@app.command()
def doctor(
    spec: Optional[str] = typer.Argument(None, help="Job spec YAML: also check the quotas its layouts need."),
    platform: Optional[str] = typer.Option(None, "--platform", help=f"{either()}: check only what that "
                                                                     f"platform needs (default: {every()})."),
    role: Optional[str] = typer.Option(None, "--role", help="SageMaker execution role (name or ARN) you launch with; "
                                                            "without it, each job gets its own."),
    bucket: Optional[str] = typer.Option(None, "--bucket", help="Job bucket (default trainctl-ACCOUNT-REGION)."),
    subnet: Optional[str] = typer.Option(None, "--subnet", help="Subnet id(s) as given to launch (default: the "
                                                               "subnet launch would choose for the plan's AZ)."),
    refresh: bool = typer.Option(False, "--refresh", help="Ask AWS again instead of using the plan's cached answers "
                                                          "(after raising a quota)."),
) -> None:
    """Check that this account and region can launch the spec.

    One pass/fail line per check (credentials, quotas, role, route to S3, bucket, scores), with the fix."""
    from trainctl.usecases.doctor import checks as d
    from trainctl.render import table_console

    width = table_console(100).width  # each check wrapped under its text; a `command` is never split
    on_check = None if OPTS.output == "json" else (lambda c: typer.echo(d.render([c], width).rsplit("\n", 1)[0]))
    checks = d.run(spec, role=role, bucket=bucket, subnet=subnet, platform=platform, on_check=on_check,
                   refresh=refresh)
    if OPTS.output == "json":
        from trainctl import render

        render.print_json(d.to_json(checks))
    else:
        typer.echo(d.render(checks).rsplit("\n", 1)[1])
    if any(c.status == "fail" for c in checks):
        raise typer.Exit(1)
