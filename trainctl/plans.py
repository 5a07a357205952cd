"""The plan contract: `Plan`, `Option` and `Excluded` as frozen pydantic models.

One model serves every stage that touches a plan, so no stage re-reads a dict by hand:
- `trainctl plan -o json` prints `Plan.model_dump(mode="json")`; `trainctl schema --plan` prints its schema;
- a saved plan (`launch --plan plan.json`) is read back with `load_saved_plan`, validated by the same model;
- `launch` and the backends take a typed `Option`;
- the job store keeps the launched option as `Option.model_dump_json()` and reads it back with the model.

Floats are rounded when serialised (cents, milli-hours) so that documents stay readable; the values in
memory keep full precision for ranking. Pure: no I/O beyond the file read in `load_saved_plan`.
"""
from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, PlainSerializer, ValidationError, field_validator,
                      model_serializer, model_validator)

from trainctl.spec import MAX_NODES, Platform  # the registered platforms (catalog/platforms.py)


def _rounded(digits: int):
    return PlainSerializer(lambda v: None if v is None else round(v, digits), return_type=float | None,
                           when_used="json")


Market = Literal["spot", "on-demand"]
# An option's market: the spec's markets, or an EC2 Capacity Block offered for the layout (planner/capacity_blocks.py)
OptionMarket = Literal["spot", "on-demand", "capacity-block"]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
REGION_PATTERN = r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$"
AZ_PATTERN = r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d[a-z]$"


# One end of a throughput band: samples/s, rounded like the throughput itself.
_BandEnd = Annotated[float, Field(ge=0, allow_inf_nan=False),
                     PlainSerializer(lambda v: round(v, 2), return_type=float, when_used="json")]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DataTerms(_Frozen):
    """What the job's input data adds to an option (planner/data_terms.py): the copy at start and its repeats, the
    ingress of streamed samples, and the dollars of S3 requests and of reading across Regions."""

    copy_hours: Annotated[NonNegative, _rounded(4)] = Field(0.0, description="the copy at start, hours (billed)")
    copies: Annotated[NonNegative, _rounded(3)] = Field(0.0, description="expected copies: the start's and one per "
                                                                        "Spot replacement (0: nothing copied)")
    ingress_gbps: Annotated[NonNegative, _rounded(3)] = Field(0.0, description="streamed data per node, Gbps")
    egress_usd: Annotated[NonNegative | None, _rounded(2)] = Field(
        None, description="expected cross-Region transfer dollars (0 in the data's Region; None: not priced)")
    requests_usd: Annotated[NonNegative, _rounded(2)] = Field(0.0, description="expected S3 GET request dollars")
    input_bound: bool = Field(False, description="the link (or S3's request rate) cannot carry the streamed samples "
                                                 "with the gradients: throughput capped")
    priced: bool = Field(True, description="False: a channel's size was neither given nor measured")
    stream_cap_gbps: int | None = Field(None, ge=1, description="EC2: mount-s3's --maximum-throughput-gbps per node, the "
                                                                "link's baseline less the gradients' share (None: "
                                                                "nothing streamed)")


class CapacityBlockTerms(_Frozen):
    """An EC2 Capacity Block offer an option runs on: bought up front, no interruptions, ended by AWS at its end."""

    offering_id: str = Field(min_length=1, max_length=128)
    availability_zone: str = Field(pattern=AZ_PATTERN)
    start: str = Field(description="ISO 8601 UTC")
    end: str = Field(description="ISO 8601 UTC; AWS terminates the instances 30 minutes before it")
    duration_hours: Annotated[NonNegative, _rounded(2)]
    wait_hours: Annotated[NonNegative, _rounded(2)] = Field(description="from the plan to the block's start")
    upfront_fee_usd: Annotated[NonNegative, _rounded(2)] = Field(description="paid when bought, used or not")
    unused_hours: Annotated[NonNegative, _rounded(2)] = Field(description="block hours the job leaves unused")
    # (2048: a SageMaker training plan's ARN, botocore TrainingPlanArn)
    reservation_id: str | None = Field(None, max_length=2048, description="the Capacity Reservation the block is "
                                                                         "once bought (EC2), or the training plan's "
                                                                         "ARN (SageMaker): None for an offer to buy")


class ReservationTerms(_Frozen):
    """An On-Demand Capacity Reservation the account holds that an On-Demand option launches into (targeted): paid at
    the On-Demand rate whether used or not, so the hours the job runs inside it add nothing to the bill."""

    reservation_id: str = Field(min_length=1, max_length=64)
    availability_zone: str = Field(pattern=AZ_PATTERN)
    available: int = Field(ge=0, description="instances it could still take when planned")
    match: Literal["open", "targeted"] = Field(description="InstanceMatchCriteria")
    end: str | None = Field(None, description="ISO 8601 UTC; None: it has no end date")
    hours_inside: Annotated[NonNegative, _rounded(3)] = Field(description="the job's hours before the end (all: no "
                                                                           "end); these add nothing to the bill")
    hours_after: Annotated[NonNegative, _rounded(3)] = Field(0.0, description="hours past the end, billed at the "
                                                                               "On-Demand rate")


class Option(_Frozen):
    """One launchable layout with its expected hours and dollars, and why it ranks where it does."""

    rank: int = Field(ge=0, description="1 = best by the plan's objective (0 before ranking)")
    platform: Platform
    instance_type: str = Field(min_length=1, max_length=64)
    count: int = Field(ge=1, le=MAX_NODES, description="nodes")
    market: OptionMarket
    region: str = Field(pattern=REGION_PATTERN)
    availability_zone: str | None = Field(None, pattern=AZ_PATTERN,
                                          description="the AZ with the best placement score (Spot, live plans)")
    accelerators: int = Field(ge=1, description="ranks in the whole layout: GPUs, or NeuronCores on Trainium")
    hourly_usd: Annotated[NonNegative, _rounded(4)] = Field(description="the whole layout, per hour")
    throughput_samples_per_s: Annotated[NonNegative, _rounded(2)]
    throughput_source: Literal["measured", "given", "model"]
    hours: Annotated[NonNegative, _rounded(3)] = Field(description="expected billed hours, rework included")
    expected_cost_usd: Annotated[NonNegative, _rounded(2)]
    spot_placement_score: int | None = Field(None, ge=1, le=10)
    interruptions_expected: Annotated[NonNegative, _rounded(3)] = 0.0
    fits_memory: bool = True
    pareto: bool = False
    why: tuple[str, ...] = ()
    strategy: Literal["ddp", "fsdp", "hsdp"] = Field(
        "ddp", description="ddp: replicated; fsdp: sharded over every rank; hsdp: sharded within a node, "
                           "replicated across nodes")
    micro_batch: int | None = Field(None, ge=1, description="samples per rank per forward/backward pass; None "
                                                             "in plans saved before it existed: the spec's batch")
    grad_accum: int = Field(1, ge=1, description="micro-batches accumulated per optimizer step")
    capacity_odds: Annotated[float | None, Field(ge=0, le=1), _rounded(2)] = None
    wall_hours: Annotated[NonNegative, _rounded(3)] = Field(0.0, description="hours + expected wait for capacity")
    quota_ok: bool | None = None
    price_source: str = ""
    throughput_band: tuple[_BandEnd, _BandEnd] | None = Field(
        None, description="samples/s, about the 10th and 90th percentile of the calibrated model's error (model only)")
    network_assumed: Literal["burst", "burst, then baseline", "sustained", "as measured", "none"] | None = Field(
        None, description="the inter-node bandwidth the throughput assumed: burst credits, burst then baseline, a "
                          "link without burst, the measured layout, or no inter-node link")
    # Risk (seeded Monte Carlo of the run, trainctl/planner/spot/simulation.py); 0 in plans saved before they existed.
    cost_p50_usd: Annotated[NonNegative, _rounded(2)] = Field(0.0, description="median cost over simulated runs")
    cost_p90_usd: Annotated[NonNegative, _rounded(2)] = Field(0.0, description="90th percentile cost")
    hours_p50: Annotated[NonNegative, _rounded(3)] = Field(0.0, description="median billed hours")
    hours_p90: Annotated[NonNegative, _rounded(3)] = Field(0.0, description="90th percentile billed hours")
    input_bound: bool = Field(False, description="throughput capped by the CPUs feeding the accelerators")
    instance_types: tuple[str, ...] = Field(
        (), description="every type a node may be, in the launch's priority order (lowest expected cost first); a "
                        "fixed layout lists one type; `instance_type` names the one its throughput was priced on")
    flexible_group: str | None = Field(None, max_length=300,
                                       description="a flexible layout's name (g5:1xA10G, or types joined by '|')")
    hourly_cap_usd: Annotated[float | None, Field(ge=0), _rounded(4)] = Field(
        None, description="flexible layouts: the whole layout per hour on its dearest type at On-Demand; the EC2 "
                          "launch's MaxTotalPrice")
    data: DataTerms | None = Field(None, description="the input data's terms; None when the spec has no data:")
    volume_gb: int | None = Field(None, ge=1, description="disk per node the launch asks for (planner/disk.py): "
                                                         "SageMaker VolumeSizeInGB, EC2 root GiB; None: the "
                                                         "default, or the type's instance storage on SageMaker")
    capacity_block: CapacityBlockTerms | None = Field(
        None, description="market capacity-block: the offer bought (absent from options on other markets)")
    capacity_reservation: ReservationTerms | None = Field(
        None, description="market on-demand: the account's On-Demand Capacity Reservation the launch targets "
                          "(absent from other options)")

    @model_serializer(mode="wrap")
    def _no_block_key_unless_block(self, handler):
        # Plans without blocks or reservations keep their documents byte for byte: each key exists only on its options.
        out = handler(self)
        for key in ("capacity_block", "capacity_reservation"):
            if isinstance(out, dict) and out.get(key) is None:
                out.pop(key, None)
        return out

    @model_validator(mode="before")
    @classmethod
    def _one_type_when_fixed(cls, data: Any) -> Any:
        # Plans saved before flexible layouts existed, and fixed options: the one type.
        if isinstance(data, dict) and not data.get("instance_types") and data.get("instance_type"):
            return {**data, "instance_types": (data["instance_type"],)}
        return data

    @property
    def flexible(self) -> bool:
        return len(self.instance_types) > 1

    @property
    def type_label(self) -> str:
        """What a person reads for the machine: the type, or the flexible layout's name."""
        return self.flexible_group or self.instance_type if self.flexible else self.instance_type

    @property
    def layout(self) -> str:
        return f"{self.type_label}:{self.count}:{self.market}"

    @property
    def where(self) -> str:
        return self.availability_zone or self.region

    def describe(self) -> str:
        """One line for people: what this option is and what it is expected to cost."""
        return (f"option {self.rank}: {self.count} x {self.type_label} {self.market} on {self.platform} in "
                f"{self.where}: expected {self.hours:.2f} h, ${self.expected_cost_usd:,.2f} "
                f"(${self.hourly_usd:,.2f}/h, {self.throughput_samples_per_s:,.0f} samples/s "
                f"{self.throughput_source})")


class Excluded(_Frozen):
    """A layout the plan left out, and the reason (one per layout and reason)."""

    instance_type: str
    count: int
    reason: str
    platform: Platform | None = None
    market: OptionMarket | None = None
    region: str | None = None


class ExcludedGroup(_Frozen):
    """The excluded layouts that share one kind of reason ("out of memory", "over budget"): how many, and a
    few of them as examples. `plan -o json` carries these beside the full `excluded` list."""

    reason: str
    count: int = Field(ge=1)
    examples: tuple[Excluded, ...]


EXAMPLES_PER_GROUP = 3


def reason_kind(reason: str) -> str:
    """The kind of a reason: its words before the first colon ("out of memory: 26.5 GiB per A10G ..." is
    "out of memory"), or the whole reason when it names no detail after one."""
    head, sep, _ = reason.partition(": ")
    return head if sep and len(head) <= 60 else reason


def group_excluded(excluded) -> tuple[ExcludedGroup, ...]:
    """The excluded layouts grouped by kind of reason, most frequent first (ties in order of first appearance)."""
    groups: dict[str, list[Excluded]] = {}
    for e in excluded:
        e = e if isinstance(e, Excluded) else Excluded.model_validate(e)
        groups.setdefault(reason_kind(e.reason), []).append(e)
    ordered = sorted(groups.items(), key=lambda kv: -len(kv[1]))  # stable: first seen first among equals
    return tuple(ExcludedGroup(reason=kind, count=len(members), examples=tuple(members[:EXAMPLES_PER_GROUP]))
                 for kind, members in ordered)


class Plan(_Frozen):
    """`trainctl plan -o json`: the ranked options, what was left out and why, and what to know."""

    spec: str = Field(description="the spec file the plan was made from, as given")
    spec_name: str
    source: Literal["live", "offline"]
    catalog_date: str
    objective: Literal["cost", "time", "p90-cost"] = "cost"
    options: tuple[Option, ...] = ()
    excluded: tuple[Excluded, ...] = ()
    # derived from `excluded` when not given (a plan saved before this key existed still loads)
    excluded_summary: tuple[ExcludedGroup, ...] = ()
    warnings: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _summarise_excluded(cls, data: Any) -> Any:
        if isinstance(data, dict) and "excluded_summary" not in data and isinstance(data.get("excluded"), (list, tuple)):
            try:
                return {**data, "excluded_summary": group_excluded(data["excluded"])}
            except ValidationError:
                return data  # the field validation of `excluded` reports the problem, with its place
        return data

    @field_validator("options")
    @classmethod
    def _ranks_unique(cls, options: tuple[Option, ...]) -> tuple[Option, ...]:
        ranks = [o.rank for o in options if o.rank]
        if len(ranks) != len(set(ranks)):
            raise ValueError("option ranks must be unique")
        return options

    def option(self, rank: int) -> Option | None:
        return next((o for o in self.options if o.rank == rank), None)


def plan_schema() -> dict:
    return Plan.model_json_schema(mode="serialization")


def load_saved_plan(path: str) -> Plan:
    """A saved `trainctl plan -o json` document, validated; any problem is one line naming the file and field."""
    from pathlib import Path

    from trainctl.errors import UsageError

    again = "save it again with `trainctl plan SPEC -o json > plan.json`"
    p = Path(path)
    try:  # a FIFO or a device would block the read: only regular files are plans
        if not p.is_file():
            raise UsageError(f"--plan {path}: no such file; save a plan with `trainctl plan SPEC -o json > plan.json`")
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--plan {path}: cannot read it ({e.__class__.__name__}); {again}") from None
    try:
        return Plan.model_validate_json(text)
    except ValidationError as e:
        raise UsageError(f"--plan {path}: {_first_problem(e)}; {again}") from None


def _first_problem(e: ValidationError) -> str:
    errors = e.errors(include_url=False)
    first = errors[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "the document"
    if first.get("type") in ("json_invalid", "json_type"):
        return f"not a JSON plan ({' '.join(str(first.get('msg', '')).split())[:120]})"
    rest = [".".join(str(p) for p in err.get("loc", ())) or "the document" for err in errors[1:]]
    more = (f" (also {', '.join(repr(r) for r in rest[:3])}{f' and {len(rest) - 3} more' if len(rest) > 3 else ''}: "
            f"{len(rest)} more problem{'s' if len(rest) > 1 else ''})") if rest else ""
    value = first.get("input")
    shown = "" if isinstance(value, (dict, list)) or value is None else f" (got {str(value)[:40]!r})"
    msg = str(first.get("msg", "invalid")).replace("\n", " ")
    if isinstance(value, float) and not math.isfinite(value):
        msg = "must be a finite number"
    return f"{where}: {msg}{shown}{more}"
