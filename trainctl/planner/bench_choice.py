"""Pure: which layouts of a plan are worth measuring before the big run, and what the bench may cost.

The value of a measurement is the chance that it changes the choice. A layout's cost scales with
1 / throughput (its hours are samples / samples-per-second), so an option's throughput band gives its cost
band: best case = expected cost x throughput / top of the band, worst case = expected cost x throughput /
bottom of the band. An option whose best case still costs more than the top option's worst case loses
whatever a measurement says: it is not worth a dollar. The top option is measured whenever it has a band
(its measurement decides whether it stays on top). An option without a band (already measured, or its
throughput given in the spec) has nothing left to learn. Scaling the whole cost with 1 / throughput
overstates how much the fixed parts (launch overheads) move, so the rule errs towards measuring more.

Where a layout of several nodes is worth measuring, a 2-node pair per instance type and transport (EFA or TCP)
is added unless a measured layout of several nodes covers it (`pairs`). Layouts are measured once per
(instance type, nodes): the store keys a measurement by type and node count and
every platform, market and region of that layout then uses it. The objective is the plan's: cost, p90-cost
(the 90th-percentile cost scales the same way) or time (hours instead of dollars).

The bench's dollar bound per layout = its hourly price (the whole layout: price x nodes) x (the hard maximum
runtime + the billed start of its platform, planner/spot/launch_overheads.py): the most one bench job can be
billed before the platform stops it. The default cap on the whole bench is min(5% of the top option's expected
cost, $25): 5% is well under the model's out-of-source error (tens of percent, docs/model-accuracy.md), so a
bench that reveals a difference of that size pays for itself once; the $25 ceiling keeps a large job's 5% from
becoming hundreds of dollars without the user asking (`--max-usd` sets any cap). By value, the layouts worth
measuring are taken in rank order as long as their bounds stay under the cap (the others are listed as left
out by it); layouts asked for by name (`--layout`) or number (`--top`) are measured all or not at all: over the
cap, the bench refuses in one line before launching anything, as it does when not even the top one fits.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from trainctl.planner.spot.launch_overheads import START_MINUTES
from trainctl.plans import Option, Plan

DEFAULT_CAP_SHARE = 0.05     # of the top option's expected cost (see the module's docstring)
DEFAULT_CAP_CEILING_USD = 25.0
DEFAULT_MAX_MINUTES = 15.0   # the hard maximum runtime of one bench job


@dataclass(frozen=True)
class Candidate:
    """One layout the bench may measure, with why (or why not)."""

    option: Option
    worth: bool
    reason: str
    bound_usd: float

    @property
    def layout(self) -> str:
        return f"{self.option.type_label}:{self.option.count}:{self.option.market}"


@dataclass(frozen=True)
class BenchChoice:
    chosen: tuple[Candidate, ...]
    skipped: tuple[Candidate, ...]
    cap_usd: float
    cap_rule: str
    bound_usd: float                 # the chosen layouts' bounds added up
    refusal: str | None = None       # one line when the bench would exceed the cap
    notes: tuple[str, ...] = field(default_factory=tuple)


def _objective_value(option: Option, objective: str) -> float:
    if objective == "time":
        return option.wall_hours or option.hours
    if objective == "p90-cost" and option.cost_p90_usd:
        return option.cost_p90_usd
    return option.expected_cost_usd


def value_range(option: Option, objective: str) -> tuple[float, float]:
    """(best case, worst case) of the objective across the option's throughput band."""
    value = _objective_value(option, objective)
    band = option.throughput_band
    rate = option.throughput_samples_per_s
    if not band or option.throughput_source != "model" or rate <= 0 or band[0] <= 0:
        return value, value
    return value * rate / band[1], value * rate / band[0]


def bound_usd(option: Option, max_minutes: float) -> float:
    """The most one bench job of this option can be billed: the whole layout's hourly price x (hard maximum
    runtime + its platform's billed start)."""
    billed_start = START_MINUTES.get(option.platform, (0.0, 5.0))[1]
    return option.hourly_usd * (max_minutes + billed_start) / 60.0


def default_cap(plan: Plan) -> tuple[float, str]:
    top = plan.options[0] if plan.options else None
    expected = top.expected_cost_usd if top is not None else 0.0
    cap = min(DEFAULT_CAP_SHARE * expected, DEFAULT_CAP_CEILING_USD)
    return cap, (f"default cap min({DEFAULT_CAP_SHARE:.0%} of the top option's expected ${expected:,.2f}, "
                 f"${DEFAULT_CAP_CEILING_USD:g}) = ${cap:,.2f}")


def _by_layout(options) -> list[Option]:
    """The best-ranked option of each (instance type, nodes): one bench per layout."""
    seen: set[tuple[str, int]] = set()
    out = []
    for o in options:
        key = (o.type_label, o.count)
        if key not in seen:
            seen.add(key)
            out.append(o)
    return out


def judge(plan: Plan, max_minutes: float) -> list[Candidate]:
    """Every layout of the plan with whether measuring it could change the top choice, in rank order."""
    options = _by_layout(plan.options)
    if not options:
        return []
    top = options[0]
    _, top_worst = value_range(top, plan.objective)
    unit = "h" if plan.objective == "time" else "$"
    out = []
    for o in options:
        best, worst = value_range(o, plan.objective)
        if o.throughput_source != "model" or not o.throughput_band:
            worth, why = False, f"throughput {o.throughput_source}: no band left to measure"
        elif o is top:
            worth, why = True, f"the top choice: its band spans {_fmt(best, unit)}-{_fmt(worst, unit)}"
        elif best < top_worst:
            worth, why = True, (f"best case {_fmt(best, unit)} beats the top's worst case {_fmt(top_worst, unit)}")
        else:
            worth, why = False, (f"best case {_fmt(best, unit)} still above the top's worst case "
                                 f"{_fmt(top_worst, unit)}: loses whatever it measures")
        out.append(Candidate(o, worth, why, bound_usd(o, max_minutes)))
    return out


def _fmt(value: float, unit: str) -> str:
    return f"{value:,.2f} h" if unit == "h" else f"${value:,.2f}"


def choose(plan: Plan, *, max_minutes: float = DEFAULT_MAX_MINUTES, top: int | None = None,
           layouts: tuple[str, ...] = (), max_usd: float | None = None,
           transport_of: Callable[[Option], str] = lambda o: "network") -> BenchChoice:
    """The layouts to measure: by value of measurement (in rank order, as many as the cap holds), or the first
    `top` layouts, or the named `layouts` (TYPE:COUNT[:MARKET], matched against the plan's options). Refused in
    one line when the layouts asked for (or the first worth measuring) are over the cap."""
    judged = judge(plan, max_minutes)
    notes: list[str] = []
    if layouts:
        chosen = [c for c in judged if _named(c.option, layouts)]
        missing = [text for text in layouts if not any(_named(c.option, (text,)) for c in chosen)]
        if missing:
            notes.append(f"--layout {', '.join(missing)}: not among the plan's options (`trainctl plan SPEC "
                         "--layout ...` says why)")
        chosen = [Candidate(c.option, True, "named with --layout", c.bound_usd) for c in chosen]
    elif top is not None:
        chosen = [Candidate(c.option, True, f"among the first {top} (--top)", c.bound_usd) for c in judged[:top]]
    else:
        chosen = [c for c in judged if c.worth]
    if max_usd is None:
        cap, rule = default_cap(plan)
    else:
        cap, rule = max_usd, f"--max-usd ${max_usd:,.2f}"
    over: list[Candidate] = []
    if not layouts and top is None:  # by value: in rank order while the bench stays under the cap
        chosen += pairs(plan, judged, chosen, max_minutes, transport_of)
        chosen, over = _within(chosen, cap)
    skipped = [c for c in judged if all(c.option is not k.option for k in chosen + over)]
    if layouts:   # what left them out is the user's choice, not their bands
        skipped = [Candidate(c.option, c.worth, "not named with --layout", c.bound_usd) for c in skipped]
    elif top is not None:
        skipped = [Candidate(c.option, c.worth, f"after the first {top} (--top {top})", c.bound_usd) for c in skipped]
    if not layouts and top is None:
        skipped += [Candidate(c.option, True, f"worth measuring, but over the {rule}", c.bound_usd)
                    for c in over if chosen]
        chosen = chosen or over  # not even the first fits: refused below
    total = sum(c.bound_usd for c in chosen)
    refusal = None
    if chosen and total > cap:
        refusal = (f"not benched: measuring {len(chosen)} layout{'s' if len(chosen) != 1 else ''} may cost up to "
                   f"${total:,.2f} ({max_minutes:g} min each at most), over the {rule}; raise --max-usd, shorten "
                   "--max-minutes or measure fewer layouts (--top N, --layout)")
    return BenchChoice(tuple(chosen), tuple(skipped), cap, rule, total, refusal, tuple(notes))


def pairs(plan: Plan, judged: list[Candidate], chosen: list[Candidate], max_minutes: float,
          transport_of: Callable[[Option], str]) -> list[Candidate]:
    """Where communication matters (a layout of several nodes is worth measuring), a 2-node pair per instance type
    and transport (`transport_of`: efa or tcp, by platform), unless a layout of several nodes of that type and
    transport is measured already: one node cannot show the network. Taken from the plan's own 2-node options,
    after the layouts chosen by value (the cap leaves them out first)."""
    covered = {(c.option.type_label, transport_of(c.option)) for c in chosen if c.option.count > 1}
    out = []
    for c in judged:
        if not (c.worth and c.option.count > 1):
            continue
        for o in plan.options:  # rank order: the best 2-node option of each transport of this type
            key = (o.type_label, transport_of(o))
            if o.type_label != c.option.type_label or o.count != 2 or key in covered:
                continue
            covered.add(key)
            out.append(Candidate(o, True, f"2-node pair: the {key[1]} network of {o.type_label} "
                                          f"({c.layout} is worth measuring)", bound_usd(o, max_minutes)))
    return out


def _within(chosen: list[Candidate], cap: float) -> tuple[list[Candidate], list[Candidate]]:
    kept: list[Candidate] = []
    spent = 0.0
    for i, c in enumerate(chosen):
        if spent + c.bound_usd > cap:
            return kept, chosen[i:]
        kept.append(c)
        spent += c.bound_usd
    return kept, []


def _named(option: Option, layouts: tuple[str, ...]) -> bool:
    for text in layouts:
        parts = text.split(":")
        if len(parts) < 2 or parts[0] != option.type_label or parts[1] != str(option.count):
            continue
        if len(parts) >= 3 and parts[2] != option.market:
            continue
        return True
    return False


def measure_words(spec: str, options: list[Option]) -> str:
    """What measuring the top layout costs, said after a warning that the model's error is not known there."""
    top = _by_layout(options)[0]
    if top.throughput_source != "model":
        return ""
    return (f"; `trainctl bench {spec} --layout {top.type_label}:{top.count}:{top.market}` measures it for at most "
            f"${bound_usd(top, DEFAULT_MAX_MINUTES):,.2f} ({DEFAULT_MAX_MINUTES:g} min)")


def unsure_line(plan: Plan, device_of: Callable[[Option], str]) -> str | None:
    """One line when the throughput bands are wide enough to change the top choice (a rival's best case beats the
    top's worst case, as `judge` reads them), with the price of settling it: `trainctl bench` of the top layout and
    the first such rival, at their dollar bounds. Only rivals on another device count: on the same device the model's error is
    shared (one fit, one efficiency), so the band moves both estimates together and cannot reorder them. None when
    the bands cannot change the choice."""
    judged = judge(plan, DEFAULT_MAX_MINUTES)
    top_device = device_of(judged[0].option) if judged else ""
    rivals = [c for c in judged[1:] if c.worth and device_of(c.option) != top_device]
    if not judged or not rivals:
        return None
    top, rival = judged[0], rivals[0]
    more = f" (and {len(rivals) - 1} more)" if len(rivals) > 1 else ""
    return (f"throughput uncertain enough to change the top choice: {rival.layout}{more} at the top of its band "
            f"beats {top.layout} at the bottom of its own; `trainctl bench {plan.spec} --layout {top.layout} "
            f"--layout {rival.layout}` settles it for at most ${top.bound_usd + rival.bound_usd:,.2f} "
            f"({DEFAULT_MAX_MINUTES:g} min each)")
