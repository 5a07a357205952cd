"""A row of the IAM table (`Call`: one API operation and the `Grant`s it needs) and the rows a backend brings as
data: `trainctl/backends/<platform>/iam_calls.toml`, read here without importing the backend (the pure folders may
not import `trainctl/backends/`, docs/architecture.md). So a new backend adds its calls in its own folder and edits
nothing in `iam/`; iam/calls.py holds the rows every platform shares and joins the backends' rows to them."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from trainctl.catalog.platforms import NAMES, data_file
from trainctl.iam.constants import SAME_ACCOUNT, TAGGED_REQUEST, TAGGED_RESOURCE, WITH_BOUNDARY

CALLS_FILE = "iam_calls.toml"
# The conditions a backend's file may name instead of writing them out (iam/constants.py): statements with the
# same scoping merge, so the shared ones are written once
NAMED_CONDITIONS = {"tagged-request": TAGGED_REQUEST, "tagged-resource": TAGGED_RESOURCE,
                    "same-account": SAME_ACCOUNT, "with-boundary": WITH_BOUNDARY}


@dataclass(frozen=True)
class Grant:
    actions: tuple[str, ...]
    resources: tuple[str, ...] = ("*",)
    condition: dict | None = None
    why: str = ""


@dataclass(frozen=True)
class Call:
    """One API operation trainctl calls ('service:Operation', botocore's names) and what it needs."""

    operation: str
    platforms: tuple[str, ...]    # which --platform needs it; planning and the job bucket need every one
    grants: tuple[Grant, ...] = field(default=())


def _grant(raw: dict, where: str) -> Grant:
    unknown = set(raw) - {"actions", "resources", "condition", "why"}
    if unknown or not raw.get("actions"):
        raise ValueError(f"{where}: a [[call.grant]] takes actions (required), resources, condition and why; "
                         f"not {sorted(unknown)}")
    condition = raw.get("condition")
    if isinstance(condition, str):
        if condition not in NAMED_CONDITIONS:
            raise ValueError(f"{where}: condition {condition!r} is none of {', '.join(NAMED_CONDITIONS)}")
        condition = NAMED_CONDITIONS[condition]
    return Grant(tuple(raw["actions"]), tuple(raw.get("resources", ("*",))), condition, raw.get("why", ""))


def calls_in(path: Path, platform: str) -> tuple[Call, ...]:
    """The rows of one `iam_calls.toml`, each needed by `platform` alone."""
    with path.open("rb") as f:
        rows = tomllib.load(f).get("call", [])
    if not all(isinstance(row.get("operation"), str) and ":" in row["operation"] for row in rows):
        raise ValueError(f"{path}: each [[call]] names its operation as 'service:Operation'")
    return tuple(Call(row["operation"], (platform,),
                      tuple(_grant(g, f"{path}: {row['operation']}") for g in row.get("grant", [])))
                 for row in rows)


def platform_calls(platform: str) -> tuple[Call, ...]:
    """The rows of the platform's `iam_calls.toml` (none when its backend makes no call of its own)."""
    path = data_file(platform, CALLS_FILE)
    return calls_in(path, platform) if path.is_file() else ()


def backend_calls() -> tuple[Call, ...]:
    """Every backend's own rows, in the platforms' order."""
    return tuple(call for platform in NAMES for call in platform_calls(platform))
