"""Each backend's launch options, declared once with their help (in the style of TorchX's `runopts`).

The declaration is a frozen dataclass per platform; every field carries its help text in its metadata.
From it come:
- the flags of `trainctl launch` (cli.py builds the command's signature from `launch_flags()`), each flag's
  help naming the platform(s) it applies to;
- `resolve(platform, given)`: the backend's typed options, or one line refusing a flag of the other platform.

Light on purpose (stdlib only): the CLI reads these declarations at start-up, before any AWS import.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from trainctl.backends.notify_target import check_reach, check_target
from trainctl.errors import UsageError


def opt(help: str, default: Any = None, *, minimum: float | None = None, check=None):
    """A declared option: its help, its default, (for numbers) its smallest accepted value, and the function
    that checks a given value (returns it, or raises a UsageError)."""
    return field(default=default, metadata={"help": help, "min": minimum, "check": check})


# Declared once, shared by both platforms: the same meaning on each.
_BUCKET = "Job bucket (default trainctl-ACCOUNT-REGION, created encrypted with public access blocked)."
_SUBNET = ("Subnet id(s), comma-separated, all in one VPC (default: the default VPC's subnet in the AZ with "
           "the best placement score).")
_SECURITY_GROUP = ("Security group id, used as it is: it must let the job's hosts reach each other "
                   "(default: a new group open only to itself).")


_NOTIFY = ("Send the job's news (state changes, interruptions, budget at 50/80/100%, the end and its dollars) to "
           "an SNS topic ARN or an https:// webhook; `watch` sends them (docs/cost-model.md).")

_NOTIFY_PRIVATE = ("Accept a --notify webhook at a private or link-local IP address (refused otherwise: the news "
                   "would go inside this machine's network).")

_CROSS_REGION_DATA = ("Allow data: channels in a bucket of another region (each byte read is billed as "
                      "cross-region transfer; refused without this flag; SageMaker never reads another region's).")

# One help for both platforms (SageMaker's StoppingCondition; on EC2 the node agents enforce it).
_MAX_RUNTIME = ("Stop the training job after this many hours; it checkpoints first (default: twice the expected "
                "hours plus 30 minutes; at most 28 days).")


@dataclass(frozen=True)
class SageMakerOptions:
    role: str | None = opt("SageMaker execution role name or ARN (default: the spec's role, or one "
                           "created for the job and deleted by down).")
    image: str | None = opt("Training image URI (default: trainctl's image table).")
    bucket: str | None = opt(_BUCKET)
    subnet: str | None = opt(_SUBNET)
    security_group: str | None = opt(_SECURITY_GROUP)
    max_runtime_hours: float | None = opt(_MAX_RUNTIME, minimum=0.02)
    distribution: str | None = opt("torch_distributed (torchrun, NCCL), smddp (SageMaker's data parallelism "
                                   "library) or smp (its model parallelism library v2) (default: the spec's "
                                   "distribution, else torch_distributed).")
    notify: str | None = opt(_NOTIFY, check=check_target)
    notify_private_address: bool | None = opt(_NOTIFY_PRIVATE)


@dataclass(frozen=True)
class Ec2Options:
    ami: str | None = opt("AMI id (default: the AWS Deep Learning AMI from its public SSM parameter).")
    bucket: str | None = opt(_BUCKET)
    subnet: str | None = opt(_SUBNET)
    security_group: str | None = opt(_SECURITY_GROUP)
    ssh_cidr: str | None = opt("Allow SSH from this CIDR only (no SSH by default; 0.0.0.0/0 is refused).")
    max_runtime_hours: float | None = opt(_MAX_RUNTIME, minimum=0.02)
    log_retention_days: int | None = opt("Days CloudWatch Logs keeps the job's log group /trainctl/JOB, which "
                                         "down leaves (default 90; one of 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, "
                                         "180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653).",
                                         minimum=1)
    notify: str | None = opt(_NOTIFY, check=check_target)
    notify_private_address: bool | None = opt(_NOTIFY_PRIVATE)
    allow_cross_region_data: bool | None = opt(_CROSS_REGION_DATA)


OPTIONS: dict[str, type] = {"sagemaker": SageMakerOptions, "ec2": Ec2Options}


@dataclass(frozen=True)
class Flag:
    """One `trainctl launch` flag: where its value goes, its type, its help and the platforms it applies to."""

    name: str
    type_: type
    help: str
    platforms: tuple[str, ...]
    minimum: float | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def _base_type(annotation: Any) -> type:
    text = str(annotation)  # "str | None", "float | None" under `from __future__ import annotations`
    return {"float": float, "int": int, "bool": bool}.get(text.split(" ")[0], str)


def launch_flags() -> list[Flag]:
    """Every platform option as one flag, in declaration order; a flag shared by platforms appears once."""
    found: dict[str, Flag] = {}
    for platform, cls in OPTIONS.items():
        for f in dataclasses.fields(cls):
            prev = found.get(f.name)
            platforms = (prev.platforms if prev else ()) + (platform,)
            found[f.name] = Flag(f.name, _base_type(f.type), f.metadata["help"], platforms, f.metadata["min"])
    return list(found.values())


def flag_help(flag: Flag) -> str:
    return f"{'/'.join(flag.platforms)}: {flag.help}"


def resolve(platform: str, given: dict[str, Any], context: str = "") -> Any:
    """The typed options of `platform` from the flags given (None = not given). A flag of another platform
    or a value out of range is refused in one line that says what to do."""
    cls = OPTIONS[platform]
    names = {f.name: f for f in dataclasses.fields(cls)}
    flags = {f.name: f for f in launch_flags()}
    values: dict[str, Any] = {}
    for name, value in given.items():
        if value is None:
            continue
        flag = flags.get(name)
        if flag is None:
            raise UsageError(f"unknown launch option {name!r}")
        if name not in names:
            raise UsageError(f"{flag.flag} applies to {' and '.join(flag.platforms)} only, and "
                             f"{context or 'the option to launch'} is on {platform}: drop {flag.flag} or "
                             f"choose {'/'.join(flag.platforms)} (--platform)")
        try:
            value = flag.type_(value)
        except (TypeError, ValueError):
            raise UsageError(f"{flag.flag} {value!r}: must be a {flag.type_.__name__}") from None
        if flag.minimum is not None and value < flag.minimum:
            raise UsageError(f"{flag.flag} {value}: must be at least {flag.minimum}")
        if names[name].metadata.get("check"):
            value = names[name].metadata["check"](value)
        values[name] = value
    if values.get("notify"):  # a check across two flags: the address, and whether a private one is meant
        check_reach(values["notify"], bool(values.get("notify_private_address")))
    return cls(**values)


def with_launch_flags(fn):
    """Appends one typer option per declared platform option to a command's signature (cli.py `launch`):
    the flags and their --help come from the declarations above, never from a second list in the CLI."""
    import inspect
    from typing import Optional

    import typer

    sig = inspect.signature(fn, eval_str=True)
    params = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    for f in launch_flags():
        limits = {"min": f.minimum} if f.minimum is not None else {}
        params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=Optional[f.type_],
                                        default=typer.Option(None, f.flag, help=flag_help(f), **limits)))
    fn.__signature__ = sig.replace(parameters=params)
    return fn
