"""What the pure layers know of each platform, as data: one `PlatformFacts` entry per backend, read from the
backend's own `trainctl/backends/<platform>/platform.toml` (data, no code).

The spec's `platforms:` names, a plan's `platform`, the planner's launch overheads and Spot recovery, the CLI's
`--platform` help and the IAM table's platforms all read this registry. It lives below every layer (catalog/)
because those readers run before, or without, any backend: `trainctl schema`, an offline plan, the sandbox's
seeded policy; the pure folders may not import `trainctl/backends/` (docs/architecture.md), so they read its data
file instead: a new backend adds its folder and edits nothing here. A backend points at its entry
(`Backend.facts`, backends/base.py) and tests/sandbox/backends/test_backend_contract.py checks that the backends'
registry and this one name the same platforms in the same order.
"""
from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal


@dataclass(frozen=True)
class PlatformFacts:
    name: str                       # as the spec, plans, flags and records write it
    title: str                      # as sentences name it
    # minutes of one launch: (not billed, billed) before the first step (planner/spot/launch_overheads.py)
    start_minutes: tuple[float, float]
    # seconds between the Spot notice and the job hearing of it (planner/spot/risk.py)
    notice_poll_s: float
    # True where a Spot reclaim restarts the whole job on new capacity (SageMaker's managed Spot): no node is
    # billed while it waits, every node copies its data again, the job cannot shrink (elastic), and a
    # fallback to On-Demand moves the whole job. False where the lost nodes alone are replaced (EC2).
    restarts_whole_job: bool
    # How the planner prices and limits a layout, each one of the kinds it models (a platform that bills, limits
    # or stores otherwise needs the planner to model that kind first):
    # the On-Demand price list (AWS Price List service code; catalog.json keeps its prices under `name`)
    price_list: str
    # Spot: the EC2 Spot price history itself, or the platform's On-Demand price x (1 - EC2's Spot discount)
    spot_price: Literal["ec2-history", "ec2-discount"]
    # the Service Quota a layout draws on: vCPUs of the type's EC2 family quota (by QuotaCode, catalog.ec2_quota),
    # or instances of a quota per type named by `type_quota` (by QuotaName), in `quota_service`
    quota_service: str
    type_quota: str | None            # "{type}" and "{spot}" ("spot " or "") filled in; None: vCPUs per family
    # each node's disk: an EBS root volume holding the image (EC2), or the platform's training volume
    # (VolumeSizeInGB), replaced by the type's NVMe instance storage where it has some (SageMaker)
    disk: Literal["root-volume", "training-volume"]
    type_prefix: str                  # how the platform spells an instance type: "ml." + "g5.xlarge"
    training_types_only: bool         # offers only the catalog's types marked `sagemaker_training`
    one_type_per_job: bool            # a flexible layout is a failover across types, not one mixed fleet
    efa_types: frozenset[str] | None  # the EFA types on which NCCL gets EFA (None: every EFA type)
    streams_via_mount_s3: bool        # a streamed channel goes through mount-s3, capped to leave the gradients room
    # what a job boots (catalog/images.py): a DLC training image the platform runs, or a Deep Learning AMI on
    # which trainctl's node agent does the rest (installs the Lustre client an FSx channel needs, among others)
    boots: Literal["training-image", "dlami"]

    def quota_name(self, instance_type: str, market: str) -> str:
        """The name of the per-type quota a layout of `instance_type` draws on (`type_quota` set)."""
        return str(self.type_quota).format(type=instance_type, spot="spot " if market == "spot" else "")

    def offers(self, instance) -> bool:
        """Whether the platform offers the catalog's instance type at all."""
        return instance.sagemaker_training or not self.training_types_only


# Where the backends' folders are, found from this package (package data, tests/project/test_wheel.py): reading a
# backend's data files imports none of its code, so the pure folders may read them (docs/architecture.md)
BACKENDS_DIR = Path(__file__).resolve().parent.parent / "backends"
PLATFORM_FILE = "platform.toml"   # the template carries `platform.toml.example`: it is no platform


def _entry(path: Path) -> tuple[int, PlatformFacts]:
    """One backend's `platform.toml` as (its order, its entry); a field missing or unknown names the file."""
    with path.open("rb") as f:
        raw = tomllib.load(f)
    fields = {f.name for f in dataclasses.fields(PlatformFacts)}
    optional = {"type_quota", "efa_types"}  # TOML has no null: left out means None
    unknown, missing = set(raw) - fields - {"order"}, (fields - optional | {"order"}) - set(raw)
    if unknown or missing:
        raise ValueError(f"{path}: unknown fields {sorted(unknown)}, missing fields {sorted(missing)}; "
                         "see catalog/platforms.py PlatformFacts")
    if raw["name"] != path.parent.name:
        raise ValueError(f"{path}: name {raw['name']!r} is not its folder's name {path.parent.name!r}")
    values = {**dict.fromkeys(optional), **{k: v for k, v in raw.items() if k != "order"}}
    values["start_minutes"] = tuple(values["start_minutes"])
    if values["efa_types"] is not None:
        values["efa_types"] = frozenset(values["efa_types"])
    return raw["order"], PlatformFacts(**values)


def read_platforms(backends_dir: Path = BACKENDS_DIR) -> dict[str, PlatformFacts]:
    """Every backend's entry, by name, in their `order` (the registry's, backends/__init__.py BACKENDS): the
    schema's enum, the spec's default `platforms:` and the words that name the platforms follow it."""
    entries = sorted((_entry(path) for path in backends_dir.glob(f"*/{PLATFORM_FILE}")),
                     key=lambda e: (e[0], e[1].name))
    return {entry.name: entry for _, entry in entries}


def data_file(platform: str, name: str) -> Path:
    """A data file of the platform's backend folder (`iam_calls.toml`: its rows of the IAM table, iam/calls.py)."""
    return BACKENDS_DIR / platform / name


PLATFORMS: dict[str, PlatformFacts] = read_platforms()
if not PLATFORMS:  # an install without its package data (pyproject.toml): say so, not a riddle in the spec's types
    raise RuntimeError(f"no {PLATFORM_FILE} under {BACKENDS_DIR}: trainctl is installed without its data files; "
                       "reinstall it (pip install .)")
NAMES: tuple[str, ...] = tuple(PLATFORMS)


def facts(platform: str) -> PlatformFacts:
    """The entry of a platform the spec and plans already validated (a KeyError is a bug, not input)."""
    return PLATFORMS[platform]


def either(last: str = "or") -> str:
    """The platforms' names for a help text: 'sagemaker or ec2'."""
    return f" {last} ".join(NAMES) if len(NAMES) < 3 else f"{', '.join(NAMES[:-1])} {last} {NAMES[-1]}"


def every() -> str:
    """What a default of every platform is called in a help text: 'both' while there are two."""
    return "both" if len(NAMES) == 2 else "all"
