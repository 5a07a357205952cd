"""The sandbox's fault switches as `trainctl sandbox` subcommands (`interrupt`, `capacity`, `throttle`,
`latency`, `quota`, `clear-faults`): each one admin action of the running sandbox (`SandboxAdmin`), said in one
line on stderr. Stdlib and typer only: the CLI imports neither moto nor boto3."""
from __future__ import annotations

from typing import Optional

import typer

from trainctl_sandbox.server import process
from trainctl_sandbox.admin import SandboxAdmin, SandboxAdminError


def _admin() -> SandboxAdmin:
    state = process.running()
    if not state:
        typer.echo("no sandbox running: start one with `trainctl sandbox up --detach` (or any `trainctl --sandbox` "
                   "command)", err=True)
        raise typer.Exit(1)
    return SandboxAdmin(state["endpoint_url"])


def _do(call, said) -> None:
    """`said`: the line to print, or a function of the admin action's answer giving it."""
    try:
        answer = call(_admin())
    except SandboxAdminError as e:
        message = " ".join(str(e.message).split())  # one line, whatever the server said
        typer.echo(f"sandbox: {message}", err=True)
        raise typer.Exit(2) from None
    typer.echo(said(answer) if callable(said) else said, err=True)


def interrupt(job: str = typer.Argument(..., help="Job id (from `trainctl launch`): SageMaker or EC2."),
              after_seconds: Optional[float] = typer.Option(None, "--after-seconds", min=0,
                                                            help="Interrupt this many seconds from now (EC2: "
                                                                 "the notice now, the reclaim then; AWS gives "
                                                                 "120 s)."),
              at_step: Optional[int] = typer.Option(None, "--at-step", min=0,
                                                    help="Interrupt when a host logs this step (EC2: the notice then, "
                                                         "the reclaim --after-seconds later)."),
              nodes: Optional[int] = typer.Option(None, "--nodes", min=1,
                                                  help="EC2: how many of the job's Spot nodes are reclaimed "
                                                       "(default 1); a SageMaker job is interrupted whole.")) -> None:
    """Spot-interrupt a SageMaker or EC2 job.

    A SageMaker job now, later or at a step; an EC2 job's Spot nodes as EC2 reclaims them (the instance-action
    notice, then the termination)."""
    when = (f"when a host logs step {at_step}" if at_step is not None else
            f"in {after_seconds:g} s" if after_seconds is not None else "now")

    def said(answer: dict) -> str:
        if answer.get("platform") != "ec2":
            return f"Spot interruption of {job} {when}"
        ids = answer["instance_ids"]
        if at_step is not None:
            return (f"Spot reclaim of {nodes or 1} node{'s' if (nodes or 1) > 1 else ''} of {job} when a node logs "
                    f"step {at_step}: the interruption notice then, the reclaim {after_seconds or 0:g} s later")
        return (f"Spot reclaim of {len(ids)} node{'s' if len(ids) > 1 else ''} of {job} ({', '.join(ids)}) {when}"
                f"{'' if when == 'now' else ' (interruption notice posted now)'}")

    _do(lambda a: a.interrupt(job, after_seconds, at_step, nodes), said)


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
