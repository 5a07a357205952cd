"""Pure: the words and marks of a ranked plan: the Pareto front, the line that says why each option sits where it
does, the closest miss of a deadline, and the warning about placement scores that were not taken as odds.
Split out of planner/ranking.py (which orders the options) so that each module stays one job.
"""
from __future__ import annotations

from trainctl.planner.quotes import Quotes
from trainctl.plans import Option


def pareto_front(options: list[Option]) -> set[int]:
    """Indices of options that no other option beats on both expected cost and hours."""
    idx = sorted(range(len(options)), key=lambda i: (options[i].expected_cost_usd, options[i].hours))
    keep, best_hours = set(), float("inf")
    for i in idx:
        if options[i].hours < best_hours - 1e-12:
            keep.add(i)
            best_hours = options[i].hours
    return keep


def closest_words(o: Option, deadline_hours: float) -> str:
    return (f"no option meets the {deadline_hours:g} h deadline; the closest is {o.count}x {o.instance_type} "
            f"{o.market} on {o.platform} in {o.region}: {o.wall_hours:,.1f} wall hours expected "
            f"({o.wall_hours - deadline_hours:,.1f} h late), ${o.expected_cost_usd:,.2f}; raise "
            "constraints.deadline_hours, or allow more nodes (candidates.nodes.max) or faster families")


def low_score_warnings(ranked: list[Option], quotes: Quotes) -> list[str]:
    """One warning, only when it changed an option: a placement score asked for fewer than three instance types is
    low by AWS's design (EC2 User Guide, Spot placement score), so those options' scores were not taken as odds."""
    low = sorted({(o.instance_type, o.count, o.region) for o in ranked
                  if o.spot_placement_score is not None and o.capacity_odds is None})
    if not low:
        return []
    named = ", ".join(f"{t} x{c} in {r} (asked for {', '.join(quotes.score_configs.get((r, t, c), ())) or t})"
                      for t, c, r in low[:3]) + (f" and {len(low) - 3} more" if len(low) > 3 else "")
    return [f"Spot placement scores of {named}: a configuration of fewer than three instance types scores low by "
            "AWS's design, and scores compare only within one configuration, so those scores are not taken as "
            "capacity odds"]


def ranking_words(o: Option, i: int, ranked: list[Option], objective: str) -> tuple[str, ...]:
    """One line saying why this option sits where it does."""
    if not ranked:
        return ()
    best = ranked[0]
    if i == 0:
        # the next layout on the same side of the quota line: one ranked after only for being over quota may cost
        # less, and "$-100 less" says nothing (ranking.py: over-quota layouts go after those within quota)
        runner = next((r for r in ranked[1:] if (r.market != o.market or r.type_label != o.type_label)
                       and (r.quota_ok is False) == (o.quota_ok is False)), None)
        if objective == "p90-cost":
            line = f"lowest 90th-percentile cost: ${o.cost_p90_usd:,.2f} (expected ${o.expected_cost_usd:,.2f})"
            if runner:
                line += (f", ${runner.cost_p90_usd - o.cost_p90_usd:,.2f} less at p90 than the next layout "
                         f"({runner.type_label} x{runner.count} {runner.market})")
        elif objective == "cost":
            line = f"lowest expected cost: ${o.expected_cost_usd:,.2f}"
            if runner:
                line += (f", ${runner.expected_cost_usd - o.expected_cost_usd:,.2f} less than the next layout "
                         f"({runner.type_label} x{runner.count} {runner.market})")
        else:
            line = f"fastest: {o.wall_hours:.2f} h"
            if runner:
                line += f", {runner.wall_hours - o.wall_hours:.2f} h sooner than {runner.type_label} x{runner.count}"
        return (line,)
    if objective == "p90-cost":
        return (f"${o.cost_p90_usd - best.cost_p90_usd:,.2f} more than #1 at p90",)
    if objective == "cost":
        return (f"${o.expected_cost_usd - best.expected_cost_usd:,.2f} more than #1"
                + (f", {best.hours - o.hours:.2f} h faster" if o.hours < best.hours else ""),)
    return (f"{o.wall_hours - best.wall_hours:.2f} h slower than #1"
            + (f", ${best.expected_cost_usd - o.expected_cost_usd:,.2f} cheaper" if
               o.expected_cost_usd < best.expected_cost_usd else ""),)
