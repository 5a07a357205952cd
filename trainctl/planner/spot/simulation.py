"""Pure: one option's run as a random process, its expected value in closed form, and a seeded Monte Carlo.

A run needs `work_hours` of training (checkpoint writes included). Before it, the platform's fixed start-up
(part billed) and, for Spot, a wait for capacity. During it, each node is reclaimed at a hazard that the run
draws once (the market's level during this run: lognormal around the traced mean, the spread between traces);
an event takes one node and each other node with `same_event_p`. Each event costs:
- the work since the last checkpoint: almost nothing when the two-minute notice leaves time to checkpoint
  (`lost_hours_notice`), else uniform over the checkpoint interval (half of it on average);
- the wait for replacement capacity (lognormal; EC2 keeps billing the surviving nodes, SageMaker bills none);
- the restart, billed on every node.
With `elastic` or an `on_spot_shortage` other than wait, an event costs what recovery.py says instead (the
survivors train on fewer nodes; a wait past the slack buys On-Demand capacity or ends the job).
The formulas and the sources of every number are in docs/cost-model.md ("Spot interruptions", "Risk").
numpy only; no clock; the same seed gives the same numbers.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, replace

import numpy as np

from trainctl.planner.spot import recovery

# Gauss-Hermite nodes and weights (5 points) for the expectation over the run's hazard level.
_GH_X, _GH_W = np.polynomial.hermite.hermgauss(5)
RUNS = 2000                # Monte Carlo runs per Spot option (the p90's standard error is ~1.5% at this count)
MAX_EVENT_DRAWS = 200_000  # above this many interruptions in all runs, sum them per run by the CLT
MAX_LOAD = 0.95            # rework share cap in L W / (1 - L l); the planner excludes options above 0.5 anyway
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
    # The recovery the job will have (recovery.py); the defaults are the fixed-size wait of the original model.
    elastic_min_nodes: int = 0          # survivors keep training while at least this many (0: fixed size)
    shortage: str = "wait"              # on_spot_shortage: wait | on-demand | fail
    shortage_after_hours: float = math.inf   # a replacement wait longer than this is cut (the slack)
    fallback_price_ratio: float = 1.0   # On-Demand / Spot price per node (on-demand)
    fallback_whole: bool = False        # the fallback moves the whole job (SageMaker), not the lost nodes

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


# Per-process caches keyed by the price-free run (a plan asks for the same run in several regions and in every
# sensitivity case); the same key always gives the same value, so they change no number.
_EXPECTED: dict[tuple, tuple[float, float, float, float]] = {}
_SIMULATED: dict[tuple, tuple] = {}


@dataclass(frozen=True)
class Expected:
    interruptions: float      # layout events
    billed_hours: float       # the layout's billed hours (node-hours / nodes)
    wall_hours: float
    cost_usd: float
    fallback_usd: float = 0.0        # of cost_usd: the On-Demand premium of replacements bought On-Demand
    fail_probability: float = 0.0    # on_spot_shortage fail: the chance a replacement waits past the slack


POLICY_FIELDS = ("elastic_min_nodes", "shortage", "shortage_after_hours", "fallback_price_ratio", "fallback_whole")


def _physics(m: RunModel) -> tuple:
    """Every field but the price: cost is linear in the price, so runs that differ only in price (the same layout
    in another region, or on a platform with the same billing) share their expectation and their simulation."""
    values = dict(m.__dict__)
    del values["node_usd_per_hour"]
    return tuple(values.values())


def _seed_key(m: RunModel) -> str:
    """The simulation's seed: the run without its price and its recovery policy, so that the default policy
    draws what it always drew and the policies of one layout are compared on the same random runs."""
    values = dict(m.__dict__)
    for name in ("node_usd_per_hour", *POLICY_FIELDS):
        del values[name]
    return repr(tuple(values.values()))


def _event_pmf(m: RunModel) -> tuple[np.ndarray, np.ndarray]:
    """(probability, nodes lost) of an event taking 1..n nodes."""
    n = m.nodes
    extra = np.arange(n)
    pmf = np.array([math.comb(n - 1, int(j)) for j in extra], dtype=float) * \
        m.same_event_p ** extra * (1.0 - m.same_event_p) ** (n - 1 - extra)
    return pmf, 1 + extra


def _wait_terms(m: RunModel) -> tuple[float, float]:
    """(mean wait per event, mean survivor node-hours billed per event) over the nodes an event takes."""
    n = m.nodes
    pmf, lost = _event_pmf(m)
    mean_wait = m.wait_median(lost) * np.exp(m.wait_log_sd(lost) ** 2 / 2.0)
    return float(pmf @ mean_wait), float(pmf @ ((n - lost) * mean_wait))


def expected_events(m: RunModel) -> float:
    """E[events]: with rework, a run of W hours at rate L sees L W / (1 - L l) events (l lost per event),
    averaged over the run's hazard level (lognormal, mean 1) by Gauss-Hermite."""
    if m.hazard <= 0:
        return 0.0
    return float((_GH_W / math.sqrt(math.pi)) @ _level_counts(m))


def _level_counts(m: RunModel) -> np.ndarray:
    """The expected count of events at each Gauss-Hermite level of the run's hazard."""
    s = m.hazard_log_sd
    levels = np.exp(-s * s / 2.0 + s * math.sqrt(2.0) * _GH_X)
    rate = m.event_rate * levels
    load = np.minimum(rate * m.lost_per_event, MAX_LOAD)
    return rate * m.work_hours / (1.0 - load)


def expected(m: RunModel) -> Expected:
    """Expected events, billed hours, wall hours and cost (cached per price-free run)."""
    key = _physics(m)
    unit = _EXPECTED.get(key)
    if unit is None:
        unit = _EXPECTED[key] = _expected_unit(m)
    events, billed, wall, node_hours, premium, ended = unit
    price = m.node_usd_per_hour
    return Expected(events, billed, wall, (node_hours + premium) * price, premium * price, ended)


def _expected_unit(m: RunModel) -> tuple[float, float, float, float, float, float]:
    """(events, billed hours, wall hours, billed node-hours, On-Demand premium in Spot node-hours, chance the job
    ends for want of Spot)."""
    k = expected_events(m)
    premium = ended = 0.0
    if recovery.default_policy(m):
        wait, survivor_hours = _wait_terms(m) if k else (0.0, 0.0)
    elif k:
        survivor_hours, wait, per_premium, per_end = recovery.expected_event(m, *_event_pmf(m))
        # a run ends when any of its events waits past the slack: Poisson thinning, over the run's level
        premium = min(k * per_premium, recovery.premium_cap(m))
        ended = float((_GH_W / math.sqrt(math.pi)) @ (1.0 - np.exp(-_level_counts(m) * per_end)))
    else:
        wait = survivor_hours = 0.0
    n = m.nodes
    node_hours = n * (m.start_billed_hours + m.work_hours + k * (m.lost_per_event + m.restart_hours))
    if m.survivors_billed:
        node_hours += k * survivor_hours
    wall = (m.start_unbilled_hours + m.start_billed_hours + m.capacity_wait() + m.work_hours
            + k * (m.lost_per_event + m.restart_hours + wait))
    return k, node_hours / n, wall, node_hours, premium, ended


@dataclass(frozen=True)
class Spread:
    cost_usd: tuple[float, float, float]      # p10, p50, p90
    hours: tuple[float, float, float]         # billed hours of the layout
    wall_hours: tuple[float, float, float]
    mean_cost_usd: float
    cost_range_usd: tuple[float, float] = (0.0, 0.0)   # the cheapest and the dearest simulated run
    interrupted_share: float = 0.0                     # share of runs with at least one interruption
    failed_share: float = 0.0                          # on_spot_shortage fail: share of runs the shortage ended


def seed_for(key: str, base: int = 0) -> list[int]:
    """A stable seed from a key, so a run's numbers do not depend on which other options were planned."""
    return [base, zlib.crc32(key.encode())]


def simulate(m: RunModel, seed: list[int] | int | None = None, runs: int = RUNS) -> Spread:
    """p10/p50/p90 over `runs` seeded runs. Without a seed, the seed comes from the price-free run itself, so the
    same run always gives the same spread, whichever other options are planned with it."""
    physics = _physics(m)
    if seed is None:
        seed = seed_for(_seed_key(m))
    key = (physics, tuple(seed) if isinstance(seed, list) else seed, runs)
    unit = _SIMULATED.get(key)
    if unit is None:
        unit = _SIMULATED[key] = _simulate_unit(m, seed, runs)
    nh, hours, wall, mean, extremes, interrupted, failed = unit
    price = m.node_usd_per_hour
    return Spread(tuple(v * price for v in nh), hours, wall, mean * price, (extremes[0] * price, extremes[1] * price),
                  interrupted, failed)


def _quantiles(values: np.ndarray) -> tuple[float, float, float]:
    """PERCENTILES with linear interpolation, as numpy.percentile's default, without its overhead."""
    ordered = np.sort(values)
    out = []
    for q in PERCENTILES:
        pos = q / 100 * (ordered.size - 1)
        lo = int(pos)
        hi = min(lo + 1, ordered.size - 1)
        out.append(float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)))
    return out[0], out[1], out[2]


def _draw_events(m: RunModel, rng, size: int):
    """(billed node-hours, wall hours, On-Demand premium, ended the job or None) of `size` independent events:
    lost work, nodes taken and replacement wait drawn in that order (the share of the run left only where the
    On-Demand fallback needs it, after them, so the default policy draws what it always drew)."""
    n = m.nodes
    lost = np.full(size, m.lost_hours_notice) if m.notice_ok else rng.uniform(0.0, m.interval_hours, size)
    nodes_lost = 1 + rng.binomial(n - 1, m.same_event_p, size)
    wait = m.wait_median(nodes_lost) * np.exp(m.wait_log_sd(nodes_lost) * rng.standard_normal(size))
    left = rng.uniform(0.0, 1.0, size) if m.shortage == "on-demand" and not recovery.default_policy(m) else None
    return recovery.event_costs(m, lost, nodes_lost, wait, left)


def _clt_sums(m: RunModel, rng, counts: np.ndarray, node_hours: np.ndarray, wall: np.ndarray):
    """Add each run's sum of `counts` interruptions as count x mean + sqrt(count) x sd x normal; the premium by
    its mean per event, the chance a run ends as 1 - (1 - q)^count."""
    node_h, wall_h, premium, ended = _draw_events(m, rng, 20_000)
    root = np.sqrt(counts)
    node_hours = node_hours + counts * node_h.mean() + root * node_h.std() * rng.standard_normal(counts.size)
    wall = wall + counts * wall_h.mean() + root * wall_h.std() * rng.standard_normal(counts.size)
    extra = np.minimum(counts * float(np.mean(premium)), recovery.premium_cap(m))
    failed = float(np.mean(1.0 - (1.0 - float(np.mean(ended))) ** counts)) if ended is not None else 0.0
    return np.maximum(node_hours, 0.0), np.maximum(wall, 0.0), extra, failed


def _simulate_unit(m: RunModel, seed, runs: int):
    """(cost node-hour quantiles, billed-hour quantiles, wall-hour quantiles, mean cost node-hours, (min, max) cost
    node-hours, share of runs interrupted at least once, share of runs the Spot shortage ended) of the run.

    Each run draws its hazard level, then its count of interruptions: Poisson with that level's mean count
    L W / (1 - L l) (the expectation above, run by run); given the count, each interruption's lost work, nodes
    taken and replacement wait are independent draws, summed per run. No loop over events. Cost node-hours are
    the billed ones plus the On-Demand premium (in Spot node-hours)."""
    rng = np.random.default_rng(seed)
    n = m.nodes
    node_hours = np.full(runs, n * (m.start_billed_hours + m.work_hours), dtype=float)
    wall = np.full(runs, m.start_unbilled_hours + m.start_billed_hours + m.work_hours, dtype=float)
    extra: np.ndarray | float = 0.0
    p = max(m.capacity_odds, 0.05)
    if p < 1.0:  # failed capacity requests before one succeeds, each followed by a retry interval
        wall += (rng.geometric(p, runs) - 1) * m.capacity_retry_hours
    interrupted = failed = 0.0
    if m.hazard > 0:
        s = m.hazard_log_sd
        rate = m.event_rate * np.exp(s * rng.standard_normal(runs) - s * s / 2.0)
        load = np.minimum(rate * m.lost_per_event, MAX_LOAD)
        counts = rng.poisson(rate * m.work_hours / (1.0 - load))
        interrupted = float(np.count_nonzero(counts)) / runs
        total = int(counts.sum())
        if total > MAX_EVENT_DRAWS:  # very long runs: per-run sums by the central limit theorem
            node_hours, wall, extra, failed = _clt_sums(m, rng, counts, node_hours, wall)
        elif total:
            run_of = np.repeat(np.arange(runs), counts)
            event_node_hours, event_wall, premium, ended = _draw_events(m, rng, total)
            node_hours += np.bincount(run_of, event_node_hours, runs)
            wall += np.bincount(run_of, event_wall, runs)
            if not np.isscalar(premium):
                extra = np.minimum(np.bincount(run_of, premium, runs), recovery.premium_cap(m))
            if ended is not None:
                failed = float(np.count_nonzero(np.bincount(run_of, ended, runs))) / runs
    cost = node_hours + extra
    nh = _quantiles(cost)
    hours = tuple(v / n for v in (nh if np.isscalar(extra) else _quantiles(node_hours)))
    extremes = (float(cost.min()), float(cost.max()))
    return nh, hours, _quantiles(wall), float(cost.mean()), extremes, interrupted, failed


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
    if p.input_cost == 1.0 or input_limit_ratio is None:
        if not spot and p.fixed == 1.0:
            return m  # the other assumptions are about Spot only
    return replace(
        m, work_hours=work, hazard=m.hazard * p.hazard,
        same_event_p=m.same_event_p if p.same_event_p is None else p.same_event_p,
        notice_ok=m.notice_ok if p.notice_ok is None else p.notice_ok,
        wait_median_one=m.wait_median_one * p.wait, start_unbilled_hours=m.start_unbilled_hours * p.fixed,
        start_billed_hours=m.start_billed_hours * p.fixed, restart_hours=m.restart_hours * p.fixed,
        node_usd_per_hour=m.node_usd_per_hour * (p.spot_price if spot else 1.0),
        fallback_price_ratio=m.fallback_price_ratio / (p.spot_price if spot else 1.0))


def clear_caches() -> None:
    """Forget cached runs (benchmarks time a cold plan, as one CLI process makes it)."""
    _EXPECTED.clear()
    _SIMULATED.clear()
