"""Pure: what one Spot interruption costs under the recovery the job will really have.

The spec decides it (trainctl/spec/recovery.py): `elastic.min_nodes` lets the survivors of an EC2 layout keep
training on fewer nodes while the lost ones are replaced; `constraints.on_spot_shortage` says what happens to a
replacement that would wait past the run's slack (`wait` for Spot, buy `on-demand` capacity, or `fail` the job).
Without either (the default) an event costs what it always did: the survivors idle, billed, until the
replacement arrives.

One event takes `k` of the layout's `n` nodes; the replacement wait `w` is lognormal (simulation.RunModel). With
the wait cut at the slack `T` (w' = min(w, T)) and restart `r`:
- fixed size: survivors billed (n - k) w' (EC2), wall w';
- elastic (EC2, n - k >= min_nodes): the survivors restart on their own (r, billed on n - k), then train at
  (n - k)/n of the layout's speed until the newcomers join (max(w' - r, 0)); that work is not done again later,
  so the event's extra node-hours are (n - k) min(w', r) and its wall w' - max(w' - r, 0) (n - k)/n. The join
  is the usual restart of all n nodes;
- on-demand: a replacement cut at T is bought On-Demand for the rest of the run: k nodes (the whole job on
  SageMaker, which cannot replace part of a job) x the On-Demand premium over the Spot price x the work left,
  half the run's on average (uniform over it in the simulation);
- fail: a replacement cut at T ends the job; the run's chance of that is reported, and its dollars stay those
  of a run that finishes (its waits capped at T).
Prices enter as the ratio On-Demand / Spot, so that a run's cost stays linear in its Spot price (the caches of
simulation.py key on the price-free run). docs/cost-model.md ("Recovery: elastic and the Spot shortage").
"""
from __future__ import annotations

import math

import numpy as np

SHORTAGES = ("wait", "on-demand", "fail")


def default_policy(m) -> bool:
    """Today's recovery: fixed size, wait for Spot however long: the run model's original arithmetic."""
    return m.elastic_min_nodes <= 0 and math.isinf(m.shortage_after_hours)


def elastic_at(m, nodes_lost):
    """Whether the survivors of an event keep training (per event: an array or a scalar)."""
    survivors = m.nodes - np.asarray(nodes_lost)
    return (m.elastic_min_nodes > 0) & (survivors >= max(m.elastic_min_nodes, 1))


def event_costs(m, lost, nodes_lost, wait, left):
    """(billed node-hours, wall hours, On-Demand premium in Spot node-hours, ended the job) of sampled events.
    `left`: the share of the run's work still to do at each event (None: the default policy draws none)."""
    n = m.nodes
    survivors = n - nodes_lost
    if default_policy(m):
        node_h = n * (lost + m.restart_hours) + (survivors * wait if m.survivors_billed else 0.0)
        return node_h, lost + m.restart_hours + wait, 0.0, None
    cut = wait > m.shortage_after_hours
    waited = np.minimum(wait, m.shortage_after_hours)
    elastic = elastic_at(m, nodes_lost)
    trained = np.maximum(waited - m.restart_hours, 0.0)
    idle = np.where(elastic, np.minimum(waited, m.restart_hours), waited)
    node_h = n * (lost + m.restart_hours) + (survivors * idle if m.survivors_billed else 0.0)
    wall = lost + m.restart_hours + waited - np.where(elastic, trained * survivors / n, 0.0)
    premium = 0.0
    if m.shortage == "on-demand":
        bought = n if m.fallback_whole else nodes_lost
        premium = np.where(cut, bought * left * m.work_hours * (m.fallback_price_ratio - 1.0), 0.0)
    return node_h, wall, premium, cut if m.shortage == "fail" else None


def premium_cap(m) -> float:
    """The most the On-Demand fallback can add to a run: every node On-Demand for all of it (the per-event premium
    does not see that nodes bought On-Demand are no longer Spot; in a long run its sum would pass this)."""
    return m.nodes * m.work_hours * max(m.fallback_price_ratio - 1.0, 0.0)


def _capped_mean(median: float, sd: float, cap: float) -> float:
    """E[min(w, cap)] of a lognormal w (median, log sd): its mean less E[(w - cap)+]."""
    mean = median * math.exp(sd * sd / 2.0)
    if math.isinf(cap):
        return mean
    if cap <= 0.0:
        return 0.0
    if sd <= 0.0:
        return min(median, cap)
    d = (math.log(median) - math.log(cap)) / sd
    return mean - (mean * _phi(d + sd) - cap * _phi(d))


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _beyond(median: float, sd: float, cap: float) -> float:
    """P(w > cap)."""
    if math.isinf(cap):
        return 0.0
    if cap <= 0.0:
        return 1.0
    if sd <= 0.0:
        return float(median > cap)
    return 1.0 - _phi((math.log(cap) - math.log(median)) / sd)


def expected_event(m, pmf, lost) -> tuple[float, float, float, float]:
    """(survivor node-hours, wall hours of waiting, On-Demand premium in Spot node-hours, chance the job ends)
    of one event, in expectation over the nodes it takes (`pmf` over `lost` = 1..n)."""
    node_h = wall = premium = ended = 0.0
    n, cap, r = m.nodes, m.shortage_after_hours, m.restart_hours
    for p, k in zip(pmf, lost):
        median, sd = float(m.wait_median(k)), float(m.wait_log_sd(k))
        waited = _capped_mean(median, sd, cap)
        beyond = _beyond(median, sd, cap)
        s = n - int(k)
        if bool(elastic_at(m, k)):
            restart = _capped_mean(median, sd, min(cap, r))   # E[min(w', r)]
            idle, saved = restart, (waited - restart) * s / n
        else:
            idle, saved = waited, 0.0
        node_h += p * (s * idle if m.survivors_billed else 0.0)
        wall += p * (waited - saved)
        if m.shortage == "on-demand":
            bought = n if m.fallback_whole else int(k)
            premium += p * beyond * bought * 0.5 * m.work_hours * (m.fallback_price_ratio - 1.0)
        elif m.shortage == "fail":
            ended += p * beyond
    return node_h, wall, premium, ended
