"""The sandbox's fault switches as `trainctl sandbox` subcommands (`interrupt`, `capacity`, `throttle`,
`latency`, `quota`, `clear-faults`): each one admin action of the running sandbox (`SandboxAdmin`), said in one
line on stderr. Stdlib and typer only: the CLI imports neither moto nor boto3."""
from __future__ import annotations

from typing import Optional

import typer

from trainctl_sandbox import process
from trainctl_sandbox.admin import SandboxAdmin, SandboxAdminError


def _admin() -> SandboxAdmin:
    state = process.running()
    if not state:
        typer.echo("no sandbox running: start one with `trainctl sandbox up --detach` (or any `trainctl --sandbox` "
                   "command)", err=True)
        raise typer.Exit(1)
    return SandboxAdmin(state["endpoint_url"])


def _do(call, said: str) -> None:
    try:
        call(_admin())
    except SandboxAdminError as e:
        typer.echo(f"sandbox: {e.message}", err=True)
        raise typer.Exit(2) from None
    typer.echo(said, err=True)


def interrupt(job: str = typer.Argument(..., help="SageMaker training job id (from `trainctl launch`)."),
              after_seconds: Optional[float] = typer.Option(None, "--after-seconds", min=0,
                                                            help="Interrupt this many seconds from now."),
              at_step: Optional[int] = typer.Option(None, "--at-step", min=0,
                                                    help="Interrupt when a host logs this training step.")) -> None:
    """Spot-interrupt a SageMaker job: now, later or at a step."""
    when = (f"when a host logs step {at_step}" if at_step is not None else
            f"in {after_seconds:g} s" if after_seconds is not None else "now")
    _do(lambda a: a.interrupt(job, after_seconds, at_step), f"Spot interruption of {job} {when}")


def capacity(instance_type: str = typer.Argument(..., help="Instance type, e.g. g5.xlarge."),
             az: str = typer.Argument(..., help="Availability zone (us-east-1a), or 'all'."),
             state: str = typer.Argument(..., help="off (no capacity), on (unlimited again), or N more instances.")
             ) -> None:
    """Capacity of a type in an AZ: off, on or N instances."""
    if state not in ("on", "off") and not state.isdigit():
        typer.echo(f"capacity state {state!r}: use off, on or a number of instances", err=True)
        raise typer.Exit(2)
    available: bool | int = {"on": True, "off": False}.get(state, int(state) if state.isdigit() else False)
    where = "every AZ" if az == "all" else az
    _do(lambda a: a.set_capacity(instance_type, None if az == "all" else az, available),
        f"capacity of {instance_type} in {where}: {state}")


def throttle(operation: str = typer.Argument(..., help="API operation, e.g. RunInstances or CreateTrainingJob."),
             times: int = typer.Argument(..., min=1, help="How many of the next calls are throttled.")) -> None:
    """Throttle the next N calls of an operation."""
    _do(lambda a: a.throttle(operation, times), f"the next {times} {operation} calls are throttled")


def latency(operation: str = typer.Argument(..., help="API operation, or '*' for every call."),
            ms: float = typer.Argument(..., min=0, help="Milliseconds added to each call.")) -> None:
    """Add latency to an operation's calls."""
    _do(lambda a: a.set_latency(operation, ms), f"+{ms:g} ms on {operation}")


def quota(service: str = typer.Argument(..., help="Service code: ec2 or sagemaker."),
          name: str = typer.Argument(..., help="Quota code (L-DB2E81BA) or quota name."),
          value: float = typer.Argument(..., min=0, help="The new applied value."),
          region: Optional[str] = typer.Option(None, "--region", help="Only in this region.")) -> None:
    """Set a Service Quotas value (EC2 vCPUs, SageMaker)."""
    _do(lambda a: a.set_quota(service, name, value, region), f"quota {service} {name} = {value:g}")


def clear_faults() -> None:
    """Switch every fault off (capacity, throttle, latency)."""
    _do(lambda a: a.clear_faults(), "every fault switched off")


def add_to(app: typer.Typer) -> None:
    for command in (interrupt, capacity, throttle, latency, quota):
        app.command()(command)
    app.command("clear-faults")(clear_faults)
