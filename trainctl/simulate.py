"""Pure: one option's run as a random process, its expected value in closed form, and a seeded Monte Carlo.

A run needs `work_hours` of training (checkpoint writes included). Before it, the platform's fixed start-up
(part billed) and, for Spot, a wait for capacity. During it, each node is reclaimed at a hazard that the run
draws once (the market's level during this run: lognormal around the traced mean, the spread between traces);
an event takes one node and each other node with `same_event_p`. Each event costs:
- the work since the last checkpoint: almost nothing when the two-minute notice leaves time to checkpoint
  (`lost_hours_notice`), else uniform over the checkpoint interval (half of it on average);
- the wait for replacement capacity (lognormal; EC2 keeps billing the surviving nodes, SageMaker bills none);
- the restart, billed on every node.
The formulas and the sources of every number are in docs/cost-model.md ("Spot interruptions", "Risk").
numpy only; no clock; the same seed gives the same numbers.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, replace

import numpy as np

# Gauss-Hermite nodes and weights (5 points) for the expectation over the run's hazard level.
_GH_X, _GH_W = np.polynomial.hermite.hermgauss(5)
RUNS = 1000                # Monte Carlo runs per Spot option (p90 within ~2% of itself at this count)
MAX_EVENTS = 400           # a run still going after this many interruptions is cut (options that bad are excluded)
PERCENTILES = (10, 50, 90)


@dataclass(frozen=True)
class RunModel:
    work_hours: float
    nodes: int
    node_usd_per_hour: float
    start_unbilled_hours: float = 0.0
    start_billed_hours: float = 0.0
    capacity_odds: float = 1.0          # chance that a capacity request succeeds (placement score / 10)
    capacity_retry_hours: float = 0.5
    hazard: float = 0.0                 # mean reclaims per instance-hour (0: On-Demand)
    hazard_log_sd: float = 0.0
    same_event_p: float = 0.0
    notice_ok: bool = True
    lost_hours_notice: float = 0.0      # work lost per event when the notice checkpoint succeeds
    interval_hours: float = 0.5         # checkpoint interval (lost work when it does not)
    restart_hours: float = 0.0          # billed on every node, per event
    wait_median_one: float = 0.0        # hours to replace one node (median)
    wait_exponent: float = 0.0          # median wait grows as nodes_lost ** exponent
    wait_log_sd_one: float = 0.0
    wait_log_sd_many: float = 0.0
    survivors_billed: bool = True       # EC2: the nodes still up are billed while replacements come

    @property
    def event_rate(self) -> float:
        """Layout events per running hour: node losses / nodes lost per event."""
        n = self.nodes
        return self.hazard * n / (1.0 + (n - 1) * self.same_event_p)

    @property
    def lost_per_event(self) -> float:
        return self.lost_hours_notice if self.notice_ok else self.interval_hours / 2.0

    def wait_median(self, lost: np.ndarray | float):
        return self.wait_median_one * np.maximum(1.0, lost) ** self.wait_exponent

    def wait_log_sd(self, lost: np.ndarray | float):
        return np.where(np.asarray(lost) <= 1, self.wait_log_sd_one, self.wait_log_sd_many)

    def capacity_wait(self) -> float:
        p = max(self.capacity_odds, 0.05)
        return (1.0 - p) / p * self.capacity_retry_hours


@dataclass(frozen=True)
class Expected:
    interruptions: float      # layout events
    billed_hours: float       # the layout's billed hours (node-hours / nodes)
    wall_hours: float
    cost_usd: float


def _wait_terms(m: RunModel) -> tuple[float, float]:
    """(mean wait per event, mean survivor node-hours billed per event) over the nodes an event takes."""
    n = m.nodes
    extra = np.arange(n)
    pmf = np.array([math.comb(n - 1, int(j)) for j in extra], dtype=float) * \
        m.same_event_p ** extra * (1.0 - m.same_event_p) ** (n - 1 - extra)
    lost = 1 + extra
    mean_wait = m.wait_median(lost) * np.exp(m.wait_log_sd(lost) ** 2 / 2.0)
    return float(pmf @ mean_wait), float(pmf @ ((n - lost) * mean_wait))


def expected_events(m: RunModel) -> float:
    """E[events]: with rework, a run of W hours at rate L sees L W / (1 - L l) events (l lost per event),
    averaged over the run's hazard level (lognormal, mean 1) by Gauss-Hermite."""
    if m.hazard <= 0:
        return 0.0
    s = m.hazard_log_sd
    levels = np.exp(-s * s / 2.0 + s * math.sqrt(2.0) * _GH_X)
    rate = m.event_rate * levels
    load = np.minimum(rate * m.lost_per_event, 0.95)
    return float((_GH_W / math.sqrt(math.pi)) @ (rate * m.work_hours / (1.0 - load)))


def expected(m: RunModel) -> Expected:
    k = expected_events(m)
    wait, survivor_hours = _wait_terms(m) if k else (0.0, 0.0)
    n = m.nodes
    node_hours = n * (m.start_billed_hours + m.work_hours + k * (m.lost_per_event + m.restart_hours))
    if m.survivors_billed:
        node_hours += k * survivor_hours
    wall = (m.start_unbilled_hours + m.start_billed_hours + m.capacity_wait() + m.work_hours
            + k * (m.lost_per_event + m.restart_hours + wait))
    return Expected(k, node_hours / n, wall, node_hours * m.node_usd_per_hour)


@dataclass(frozen=True)
class Spread:
    cost_usd: tuple[float, float, float]      # p10, p50, p90
    hours: tuple[float, float, float]         # billed hours of the layout
    wall_hours: tuple[float, float, float]
    mean_cost_usd: float


def seed_for(key: str, base: int = 0) -> list[int]:
    """A stable seed per option, so its numbers do not depend on which other options were planned."""
    return [base, zlib.crc32(key.encode())]


def simulate(m: RunModel, seed: list[int] | int, runs: int = RUNS) -> Spread:
    rng = np.random.default_rng(seed)
    n = m.nodes
    node_hours = np.full(runs, n * m.start_billed_hours, dtype=float)
    wall = np.full(runs, m.start_unbilled_hours + m.start_billed_hours, dtype=float)
    p = max(m.capacity_odds, 0.05)
    if p < 1.0:  # failed capacity requests before one succeeds, each followed by a retry interval
        wall += (rng.geometric(p, runs) - 1) * m.capacity_retry_hours
    remaining = np.full(runs, m.work_hours, dtype=float)
    if m.hazard > 0:
        s = m.hazard_log_sd
        rate = m.event_rate * np.exp(s * rng.standard_normal(runs) - s * s / 2.0)
        active = np.arange(runs)
        for _ in range(MAX_EVENTS):
            if active.size == 0:
                break
            t = rng.exponential(1.0 / rate[active])
            rem = remaining[active]
            done = t >= rem
            fin = active[done]
            node_hours[fin] += n * remaining[fin]
            wall[fin] += remaining[fin]
            remaining[fin] = 0.0
            hit, t_hit = active[~done], t[~done]
            if m.notice_ok:
                lost = np.minimum(m.lost_hours_notice, t_hit)
            else:
                lost = np.minimum(rng.uniform(0.0, m.interval_hours, hit.size), t_hit)
            nodes_lost = 1 + rng.binomial(n - 1, m.same_event_p, hit.size)
            wait = m.wait_median(nodes_lost) * np.exp(m.wait_log_sd(nodes_lost) * rng.standard_normal(hit.size))
            remaining[hit] -= t_hit - lost
            node_hours[hit] += n * (t_hit + m.restart_hours)
            if m.survivors_billed:
                node_hours[hit] += (n - nodes_lost) * wait
            wall[hit] += t_hit + wait + m.restart_hours
            active = hit
    node_hours += n * remaining  # runs cut at MAX_EVENTS finish without further events
    wall += remaining
    cost = node_hours * m.node_usd_per_hour
    pct = np.percentile(np.stack([cost, node_hours / n, wall]), PERCENTILES, axis=1)
    as_floats = [tuple(float(v) for v in pct[:, i]) for i in range(3)]
    return Spread(*as_floats, float(cost.mean()))


# ----------------------------------------------------------------------------- sensitivity
@dataclass(frozen=True)
class Perturbation:
    name: str          # the assumption, as the plan names it
    hazard: float = 1.0
    same_event_p: float | None = None
    notice_ok: bool | None = None
    wait: float = 1.0
    fixed: float = 1.0
    spot_price: float = 1.0
    input_cost: float = 1.0


PERTURBATIONS = (
    Perturbation("Spot hazard x2 (trace level)", hazard=2.0),
    Perturbation("Spot hazard x0.5 (trace level)", hazard=0.5),
    Perturbation("no checkpoint on the two-minute notice", notice_ok=False),
    Perturbation("correlated reclaims (60% of the other nodes per event)", same_event_p=0.6),
    Perturbation("independent reclaims", same_event_p=0.0),
    Perturbation("replacement wait x2", wait=2.0),
    Perturbation("start-up and restart times x2", fixed=2.0),
    Perturbation("Spot prices +25%", spot_price=1.25),
    Perturbation("input CPU cost per sample x2", input_cost=2.0),
)


def perturbed(m: RunModel, p: Perturbation, input_limit_ratio: float | None) -> RunModel:
    """The same run under one changed assumption. input_limit_ratio: model rate / input capacity (None: no CPU
    work); doubling the CPU cost slows the run by max(1, r x s) / max(1, r)."""
    work = m.work_hours
    if input_limit_ratio is not None and p.input_cost != 1.0:
        r = input_limit_ratio
        work *= max(1.0, r * p.input_cost) / max(1.0, r)
    spot = m.hazard > 0
    return replace(
        m, work_hours=work, hazard=m.hazard * p.hazard,
        same_event_p=m.same_event_p if p.same_event_p is None else p.same_event_p,
        notice_ok=m.notice_ok if p.notice_ok is None else p.notice_ok,
        wait_median_one=m.wait_median_one * p.wait, start_unbilled_hours=m.start_unbilled_hours * p.fixed,
        start_billed_hours=m.start_billed_hours * p.fixed, restart_hours=m.restart_hours * p.fixed,
        node_usd_per_hour=m.node_usd_per_hour * (p.spot_price if spot else 1.0))
