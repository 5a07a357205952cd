"""Pure: each option's run model (Spot hazard, correlation, notice checkpoint, waits, fixed costs), its spread
by Monte Carlo, and the sensitivity pass that names the assumption that most changes the plan's top choice.

The planner prices an option and calls `run_model`; after constraints it calls `with_spread` and
`sensitivity`. Sources: trainctl/catalog/spot_hazard.json, trainctl/planner/spot/launch_overheads.py, docs/cost-model.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from trainctl.catalog.platforms import PLATFORMS, facts
from trainctl.planner.spot import launch_overheads
from trainctl.planner.spot import simulation as simulate
from trainctl.planner.spot.hazard import HazardTable
from trainctl.plans import Option

# How soon each platform's job hears of the notice (each backend's platform.toml: EC2's node agent polls the instance
# metadata; SageMaker SIGTERMs the container itself).
NOTICE_POLL_S = {p.name: p.notice_poll_s for p in PLATFORMS.values()}
# The checkpoint must also reach S3 before the instance goes (the agent's sync / SageMaker's checkpoint
# upload); taken at the same 500 MB/s as the local write (option_pricing.CHECKPOINT_WRITE_BYTES_PER_S).
CHECKPOINT_SYNC_FACTOR = 2.0
# The sensitivity line names a closest call only where an assumption moves the top option's lead by more
# than this (a tenth of a percent): smaller moves are rounding, not a reason to doubt the choice.
MARGIN_MOVE = 0.001


@dataclass(frozen=True)
class JobTimes:
    """What the planner knows about one layout's run before pricing it."""

    work_hours: float       # samples / throughput, checkpoint writes included
    step_s: float           # one optimizer step of the layout
    checkpoint_s: float     # one checkpoint write
    interval_hours: float   # checkpoint interval
    restart_minutes: float
    accelerator_kind: str   # gpu | neuron
    copy_start_hours: float = 0.0     # the input data's copy at start (planner/data_terms.py), billed
    copy_restart_hours: float = 0.0   # its copy again after each replacement, billed on every node
    # the recovery the spec asks for (spec/recovery.py; recovery.py prices it)
    elastic_min_nodes: int = 0        # 0: fixed size
    on_spot_shortage: str = "wait"
    max_spot_wait_hours: float = 4.0
    deadline_hours: float | None = None


@dataclass(frozen=True)
class Priced:
    option: Option
    model: simulate.RunModel
    input_limit_ratio: float | None
    extra_usd: float = 0.0   # dollars beside the node-hours (the input data's requests and transfer)


def notice_terms(platform: str, times: JobTimes, notice_s: float) -> tuple[bool, float, str]:
    """(the notice checkpoint fits, hours lost per event when it does, words)."""
    needed = NOTICE_POLL_S[platform] + times.step_s + CHECKPOINT_SYNC_FACTOR * times.checkpoint_s
    if needed <= notice_s:
        lost_h = (NOTICE_POLL_S[platform] + times.checkpoint_s) / 3600.0
        return True, lost_h, (f"checkpoint on the {notice_s:.0f} s notice ({needed:.0f} s to finish the step, "
                              "write and upload): an interruption loses almost no work")
    return False, 0.0, (f"no time to checkpoint on the {notice_s:.0f} s notice ({needed:.0f} s needed): each "
                        f"interruption loses half a checkpoint interval on average")


def run_model(platform: str, market: str, count: int, node_usd: float, times: JobTimes, odds: float | None,
              band: str | None, table: HazardTable, capacity_retry_hours: float,
              od_usd: float | None = None) -> tuple[simulate.RunModel, list[str]]:
    """The option's run model and the words that explain it. od_usd: the On-Demand price per node that an
    on-demand fallback pays (None: the Spot price, no premium)."""
    start = launch_overheads.start_cost(platform, times.accelerator_kind)
    base = dict(work_hours=times.work_hours, nodes=count, node_usd_per_hour=node_usd,
                start_unbilled_hours=start.unbilled_hours,
                start_billed_hours=start.billed_hours + times.copy_start_hours,
                capacity_odds=odds if odds is not None else 1.0, capacity_retry_hours=capacity_retry_hours,
                interval_hours=times.interval_hours)
    words = [f"start-up: {start.wall_hours * 60:.0f} min per launch, {start.billed_hours * 60:.0f} billed on "
             f"{platform}" + (" (Neuron compiles on every start)" if times.accelerator_kind == "neuron" else "")]
    if market != "spot" or band is None:
        return simulate.RunModel(**base), words
    hazard = table.for_band(band, count)
    ok, lost_h, notice_words = notice_terms(platform, times, table.notice_seconds)
    (m1, s1), (m4, s4) = table.wait_one, table.wait_four
    model = simulate.RunModel(
        **base, hazard=hazard.per_instance_hour, hazard_log_sd=hazard.log_sd,
        same_event_p=table.same_event_probability if count > 1 else 0.0, notice_ok=ok, lost_hours_notice=lost_h,
        restart_hours=launch_overheads.restart_billed_hours(times.restart_minutes, times.accelerator_kind)
        + times.copy_restart_hours,
        wait_median_one=m1, wait_exponent=math.log(m4 / m1) / math.log(4.0), wait_log_sd_one=s1,
        wait_log_sd_many=s4, survivors_billed=not facts(platform).restarts_whole_job)
    layout = f"this {count}-node layout" if count > 1 else "this node"
    words.append(f"Spot: {hazard.events_per_hour:.3f} reclaim events/h for {layout}"
                 + (f", {hazard.nodes_per_event:.1f} nodes each" if count > 1 else "")
                 + f" (band {band} scaled to the 4-node GPU traces' layout events; the advisor alone says "
                 f"{hazard.advisor_only * count:.5f}/h)")
    words.append(notice_words)
    if count > 1:
        own = facts(platform)
        words.append(f"{own.title} bills no node while it waits for capacity" if own.restarts_whole_job else
                     f"{own.title} bills the surviving nodes while replacements come")
    return with_recovery(model, platform, times, node_usd, od_usd, words)


def with_recovery(model: simulate.RunModel, platform: str, times: JobTimes, node_usd: float, od_usd: float | None,
                  words: list[str]) -> tuple[simulate.RunModel, list[str]]:
    """The run model with the recovery the spec asks for: elastic survivors (EC2 only) and what a replacement
    waiting past the slack does (recovery.py). The default (fixed size, wait) leaves the model as it was."""
    n, m, own = model.nodes, times.elastic_min_nodes, facts(platform)
    if m and n > 1:
        if own.restarts_whole_job:
            words.append(f"elastic (min_nodes {m}) does not apply: {own.title} cannot change a running job's size; "
                         "its managed Spot restarts the whole job on new capacity")
        elif m >= n:
            words.append(f"elastic: min_nodes {m} leaves no room below this {n}-node layout: it waits whole")
        else:
            model = replace(model, elastic_min_nodes=m)
            words.append(f"elastic: trains on {n - 1} of {n} nodes while a node is replaced (down to {m} of {n}; "
                         "the survivors restart at the smaller size, then again when the newcomer joins)")
    if times.on_spot_shortage == "wait":
        return model, words
    slack, said = shortage_after(model, times)
    model = replace(model, shortage=times.on_spot_shortage, shortage_after_hours=slack,
                    fallback_price_ratio=(od_usd / node_usd) if od_usd and node_usd > 0 else 1.0,
                    fallback_whole=own.restarts_whole_job)
    words.append(f"on_spot_shortage {times.on_spot_shortage}: a replacement waiting past {slack:.2f} h ({said}) "
                 + ("is bought On-Demand for the rest of the run"
                    + (f" ({own.title}: the whole job moves to On-Demand)" if own.restarts_whole_job else "")
                    if times.on_spot_shortage == "on-demand" else "ends the job"))
    return model, words


def shortage_after(model: simulate.RunModel, times: JobTimes) -> tuple[float, str]:
    """(hours a replacement may wait for Spot before the shortage policy acts, why): max_spot_wait_hours, or less
    when the deadline's slack is smaller. The slack (the deadline less the run's wall hours without replacement
    waits) is shared equally by the interruptions the run expects, so that their waits together fit it."""
    cap = times.max_spot_wait_hours
    if times.deadline_hours is None:
        return cap, "max_spot_wait_hours"
    k = simulate.expected_events(model)
    busy = (model.start_unbilled_hours + model.start_billed_hours + model.capacity_wait() + model.work_hours
            + k * (model.lost_per_event + model.restart_hours))
    share = max(times.deadline_hours - busy, 0.0) / max(k, 1.0)
    if share >= cap:
        return cap, "max_spot_wait_hours"
    return share, f"the deadline's slack of {max(times.deadline_hours - busy, 0.0):.2f} h over {max(k, 1.0):.1f} " \
                  "expected interruptions"


def recovery_words(model: simulate.RunModel, exp: simulate.Expected) -> list[str]:
    """The dollars of the recovery the spec asks for, each choice against the same run without it (nothing for
    the default: fixed size, wait)."""
    if model.hazard <= 0 or (model.elastic_min_nodes <= 0 and model.shortage == "wait"):
        return []
    out = []
    if model.elastic_min_nodes > 0:
        fixed = simulate.expected(replace(model, elastic_min_nodes=0))
        out.append(f"elastic: {_signed_usd(exp.cost_usd - fixed.cost_usd)} and {exp.wall_hours - fixed.wall_hours:+.2f} "
                   "wall h expected against idling until replaced")
    if model.shortage == "on-demand":
        waiting = simulate.expected(replace(model, shortage="wait", shortage_after_hours=math.inf))
        out.append(f"on-demand fallback: +${exp.fallback_usd:,.2f} expected (the On-Demand premium of replacements "
                   f"bought after {model.shortage_after_hours:.2f} h; {_signed_usd(exp.cost_usd - waiting.cost_usd)} "
                   f"and {exp.wall_hours - waiting.wall_hours:+.2f} wall h in all against waiting for Spot)")
    elif model.shortage == "fail":
        out.append(f"on_spot_shortage fail: {exp.fail_probability:.1%} chance the job ends unfinished (a replacement "
                   f"waits past {model.shortage_after_hours:.2f} h); the dollars shown are those of a run that "
                   "finishes")
    return out


def _signed_usd(x: float) -> str:
    return f"{'-' if x < 0 else '+'}${abs(x):,.2f}"


def with_spread(priced: Priced) -> Option:
    """The option with p50/p90 of cost and hours from a seeded Monte Carlo (On-Demand: no spread)."""
    o, m, extra = priced.option, priced.model, priced.extra_usd
    if m.hazard <= 0 and m.capacity_odds >= 1.0:
        return o.model_copy(update={"cost_p50_usd": o.expected_cost_usd, "cost_p90_usd": o.expected_cost_usd,
                                    "hours_p50": o.hours, "hours_p90": o.hours})
    s = simulate.simulate(m)  # seeded by the run itself: the same layout and billing gives the same spread
    if extra:  # the data's dollars, at their expected value in every run
        s = simulate.Spread(tuple(c + extra for c in s.cost_usd), s.hours, s.wall_hours, s.mean_cost_usd + extra,
                            (s.cost_range_usd[0] + extra, s.cost_range_usd[1] + extra), s.interrupted_share)
    why = (f"risk: ${s.cost_usd[0]:,.2f} / ${s.cost_usd[1]:,.2f} / ${s.cost_usd[2]:,.2f} (p10/p50/p90 of "
           f"{simulate.RUNS} seeded runs; {s.interrupted_share:.1%} of them interrupted), {s.wall_hours[2]:.1f} h "
           "wall at p90",)
    if s.cost_usd[2] < o.expected_cost_usd:
        why += (_rare_tail_words(s, o.expected_cost_usd),)
    return o.model_copy(update={"cost_p50_usd": s.cost_usd[1], "cost_p90_usd": s.cost_usd[2],
                                "hours_p50": s.hours[1], "hours_p90": s.hours[2], "why": o.why + why})


def _rare_tail_words(s: simulate.Spread, expected_usd: float) -> str:
    """Why a p90 can sit below the mean: when fewer than one run in ten is interrupted, the 90th-percentile run is
    an uninterrupted one, while the mean also carries the rare interruptions' rework. The simulation's own mean
    agrees with the closed-form expectation (tests/cli/test_planner_spot_risk.py): the two are not in conflict."""
    return (f"p90 below the expected cost: only {s.interrupted_share:.1%} of runs are interrupted, so the "
            f"90th-percentile run is an uninterrupted one (${s.cost_usd[2]:,.2f}); the expected ${expected_usd:,.2f} "
            f"(simulated mean ${s.mean_cost_usd:,.2f}) also counts the rare interruptions' rework, up to "
            f"${s.cost_range_usd[1]:,.2f} in the dearest run")


def sensitivity(ranked: list[Priced], objective: str) -> str | None:
    """Perturb each key assumption and re-price every option (expected cost); return one line naming the
    assumption that most changes the cheapest choice: the one that replaces it at the highest cost of keeping
    it, or, when none replaces it, the one that brings the runner-up closest (the closest call)."""
    pool = [p for p in ranked if p.option.quota_ok is not False]
    if len(pool) < 2 or objective == "time":
        return None
    base = [simulate.expected(p.model).cost_usd + p.extra_usd for p in pool]
    top = min(range(len(pool)), key=lambda i: (base[i], i))
    worst: tuple[float, str, int] | None = None
    # Rivals: other layouts. The same layout in another region moves with the top one under every assumption.
    rivals = [i for i, p in enumerate(pool) if (p.option.layout, p.option.platform) !=
              (pool[top].option.layout, pool[top].option.platform)]
    closest: tuple[float, str] = (_margin(base, top, rivals), "")
    for pert in simulate.PERTURBATIONS:
        costs = [simulate.expected(simulate.perturbed(p.model, pert, p.input_limit_ratio)).cost_usd + p.extra_usd
                 for p in pool]
        best = min(range(len(pool)), key=lambda i: (costs[i], i))
        if best == top or costs[best] >= costs[top]:
            if rivals and _margin(costs, top, rivals) < closest[0] - MARGIN_MOVE:
                closest = (_margin(costs, top, rivals), pert.name)
            continue
        regret = costs[top] / costs[best] - 1.0  # how much more today's choice would cost in that world
        if worst is None or regret > worst[0]:
            worst = (regret, pert.name, best)
    now = pool[top].option
    if worst is None:
        line = (f"sensitivity: the cheapest choice ({now.layout} on {now.platform}) stays cheapest under every "
                f"perturbed assumption ({len(simulate.PERTURBATIONS)} tried: Spot hazard x2 and x0.5, no notice "
                "checkpoint, correlation, waits, start-up, Spot prices, input cost)")
        if closest[1]:
            line += (f"; the assumption that most changes it is '{closest[1]}': its lead over the next layout "
                     f"falls from {_margin(base, top, rivals):.1%} to {closest[0]:.1%}")
        elif rivals:
            line += (f"; none moves its {_margin(base, top, rivals):.1%} lead over the next layout by more than "
                     f"{MARGIN_MOVE:.1%}")
        return line
    regret, name, best = worst
    new = pool[best].option
    return (f"sensitivity: the assumption that most changes the top choice is '{name}': then {new.layout} on "
            f"{new.platform} ({new.region}) is cheapest and {now.layout} on {now.platform} costs {regret:.0%} more")


def _margin(costs: list[float], top: int, rivals: list[int]) -> float:
    """How much more the cheapest rival costs than the top option (0.04: 4% more; inf without rivals)."""
    return min(costs[i] for i in rivals) / costs[top] - 1.0 if rivals else math.inf
