"""Pure planning: valid layouts, expected time and cost with interruptions, capacity odds, ranking.

`plan(spec, catalog, quotes, ...)` takes data and returns a `Plan`; no boto3, no clock, no printing.
The numbers' meaning and the assumptions behind them are written out in docs/cost-model.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from trainctl import input_pipeline, perf, perf_layout, risk, simulate
from trainctl.catalog import Catalog, InstanceType, load_calibration
from trainctl.catalog.spot_hazard import load_hazard_table
from trainctl.plans import Excluded, Option, Plan
from trainctl.quotes import Quotes
from trainctl.spec import JobSpec, Layout

# When a Spot request is refused, the next try comes after about this long (the placement score is
# re-asked and another AZ or option is tried); used to turn capacity odds into an expected wait.
CAPACITY_RETRY_HOURS = 0.5
# Pessimistic band for a type the Spot advisor has no data for.
UNKNOWN_BAND = ">20%"
# Checkpoints are written to local disk and synced in the background; ~500 MB/s sustained.
CHECKPOINT_WRITE_BYTES_PER_S = 500e6
# --objective values: rank by expected cost, by the 90th percentile of simulated cost, or by wall hours.
OBJECTIVES = ("cost", "p90-cost", "time")


# A finished job's throughput (whole layout, node count, job id[, platform]): see perf_layout.
MeasuredRate = perf_layout.Measured


@dataclass
class _Candidate:
    instance: InstanceType
    count: int
    markets: tuple[str, ...]


@dataclass
class PlanRequest:
    """What to plan beyond the spec: the CLI's flags."""

    objective: str = "cost"                       # one of OBJECTIVES
    platforms: tuple[str, ...] | None = None      # None: the spec's
    layouts: tuple[Layout, ...] = ()              # non-empty: exactly these layouts
    extra_warnings: tuple[str, ...] = field(default_factory=tuple)
    spec_path: str = ""                           # as the user gave it; the plan document names it


# ----------------------------------------------------------------------------- helpers
def model_shape(spec: JobSpec) -> perf.ModelShape:
    m = spec.model
    act = None
    if m.activation_gib_per_sample is not None:
        act = m.activation_gib_per_sample * perf.GIB
    elif m.arch is not None:
        a = m.arch
        act = perf.transformer_activation_bytes(a.tokens_per_sample, a.hidden, a.heads, a.layers, m.precision,
                                                m.activation_checkpointing)
    a = m.arch
    return perf.ModelShape(params=m.param_count, training_flops_per_sample=m.training_flops_per_sample,
                           precision=m.precision, optimizer=m.optimizer, activation_bytes_per_sample=act,
                           hidden=a.hidden if a else None, tokens=a.tokens_per_sample if a else None,
                           layers=a.layers if a else None, heads=a.heads if a else None,
                           family=a.family if a else None)


def candidates(spec: JobSpec, catalog: Catalog, request: PlanRequest) -> list[_Candidate]:
    """Every (instance type, node count, markets) the plan will consider: what market.py must quote."""
    cands = spec.candidates
    layouts = list(request.layouts) or list(cands.layouts)
    out: list[_Candidate] = []
    if layouts:
        for lay in layouts:
            inst = catalog.instance(lay.instance_type)
            if inst is not None:
                out.append(_Candidate(inst, lay.count, (lay.market,) if lay.market else tuple(cands.markets)))
        if request.layouts:
            return out
    families = cands.families or ([] if cands.layouts else catalog.families)
    for inst in sorted(catalog.instances.values(), key=lambda i: i.name):
        if inst.family not in families:
            continue
        for n in range(cands.nodes.min, cands.nodes.max + 1):
            out.append(_Candidate(inst, n, tuple(cands.markets)))
    return out


def _entrypoint_mismatch(spec: JobSpec, inst: InstanceType) -> str | None:
    bundled = spec.entrypoint.bundled
    if bundled == "ddp" and inst.accelerator.kind == "neuron":
        return "the bundled ddp entrypoint runs on GPUs; use 'bundled: neuron' for Trainium"
    if bundled == "neuron" and inst.accelerator.kind != "neuron":
        return "the bundled neuron entrypoint runs on Trainium; use 'bundled: ddp' for GPUs"
    if bundled == "lm" and inst.accelerator.kind == "neuron":
        return "the bundled lm entrypoint (PyTorch FSDP) runs on GPUs, not Trainium"
    return None


def _validity(inst: InstanceType, count: int) -> str | None:
    if inst.accelerator.kind == "neuron" and count > 1 and inst.name not in ("trn1.32xlarge", "trn1n.32xlarge"):
        return (f"{inst.name} is single-node only: multi-node Trainium needs EFA, i.e. trn1.32xlarge or "
                "trn1n.32xlarge")
    return None


def _throughput(spec: JobSpec, shape: perf.ModelShape, inst: InstanceType, count: int, platform: str,
                measured: dict[tuple[str, int, str], MeasuredRate], strategy: str,
                catalog: Catalog) -> perf_layout.Estimate:
    """Samples/s of the layout on this platform (SageMaker turns EFA on for some types only), with its source."""
    batch = spec.workload.batch_size_per_accelerator
    given = spec.throughput.get(inst.name) or spec.throughput.get(inst.accelerator.key)
    job = perf_layout.Job(shape, spec.model.name, batch, spec.workload.total_samples, strategy, given)
    return perf_layout.estimate(job, inst, count, platform, measured.get((spec.model.name, batch, inst.name)),
                                catalog, load_calibration())


def _pareto(options: list[Option]) -> set[int]:
    """Indices of options that no other option beats on both expected cost and hours."""
    idx = sorted(range(len(options)), key=lambda i: (options[i].expected_cost_usd, options[i].hours))
    keep, best_hours = set(), float("inf")
    for i in idx:
        if options[i].hours < best_hours - 1e-12:
            keep.add(i)
            best_hours = options[i].hours
    return keep


# ----------------------------------------------------------------------------- the plan
def plan(spec: JobSpec, catalog: Catalog, quotes: Quotes, request: PlanRequest | None = None,
         measured: dict[tuple[str, int, str], MeasuredRate] | None = None) -> Plan:
    request = request or PlanRequest()
    measured = measured or {}
    shape = model_shape(spec)
    batch = spec.workload.batch_size_per_accelerator
    cons = spec.constraints
    platforms = request.platforms or tuple(spec.candidates.platforms)
    regions = [r for r in spec.candidates.regions if r in quotes.regions]
    warnings = list(quotes.warnings) + list(request.extra_warnings)
    if shape.activation_bytes_per_sample is None:
        warnings.append("activation memory unknown (no architecture and no model.activation_gib_per_sample): "
                        "memory fit counts weights, gradients and optimizer state only")

    options: list[Option] = []
    excluded: list[Excluded] = []
    seen_excl: set[tuple[str, int, str]] = set()
    unpriced: dict[tuple[str, str], set[str]] = {}

    def exclude(inst_name: str, count: int, reason: str, **where) -> None:
        key = (inst_name, count, reason)
        if key not in seen_excl:  # one line per layout and reason, not per platform x region x market
            seen_excl.add(key)
            excluded.append(Excluded(instance_type=inst_name, count=count, reason=reason, **where))

    for cand in candidates(spec, catalog, request):
        inst, count = cand.instance, cand.count
        reason = _entrypoint_mismatch(spec, inst) or _validity(inst, count)
        if reason:
            exclude(inst.name, count, reason)
            continue
        if not inst.accelerator.supports(shape.precision):
            exclude(inst.name, count, f"{inst.accelerator.key} has no {shape.precision} support; set model.precision "
                                      f"to one of {', '.join(sorted(inst.accelerator.peak_tflops))} to consider it")
            continue
        ranks = perf.ranks(inst, load_calibration())  # GPUs, or NeuronCores: the entrypoint's unit
        n_acc = count * ranks.per_node
        fit = perf.memory_fit(shape, ranks.memory_gib, n_acc, batch, spec.model.strategy)
        if not fit.fits:
            unit = "NeuronCore" if ranks.unit == "NeuronCore" else inst.accelerator.key
            need = (f"with full sharding (fsdp) it needs at least {fit.min_accelerators_sharded} "
                    f"{'NeuronCores' if ranks.unit == 'NeuronCore' else 'accelerators'}"
                    if fit.min_accelerators_sharded else
                    "even fully sharded it does not fit: the batch's activations alone exceed memory; lower "
                    "workload.batch_size_per_accelerator or set model.activation_checkpointing")
            exclude(inst.name, count, f"out of memory: {fit.total_gib:.1f} GiB per {unit} "
                                      f"({fit.strategy}) > {fit.usable_gib:.1f} GiB usable; {need}")
            continue
        for platform in platforms:
            if platform == "sagemaker" and not inst.sagemaker_training:
                exclude(inst.name, count, "SageMaker training does not offer this type", platform=platform)
                continue
            tp = _throughput(spec, shape, inst, count, platform, measured, fit.strategy, catalog)
            feed = _input_limit(spec, inst, count, tp.samples_per_s)
            times = _job_times(spec, shape, inst, count, fit.strategy, n_acc, feed.samples_per_s)
            for region in regions:
                od_live = quotes.on_demand.get((platform, region, inst.name))
                od_cat = catalog.on_demand_price(platform, region, inst.name)
                if od_live is not None:
                    od, od_src = od_live, "Pricing API"
                elif od_cat is not None:
                    od, od_src = od_cat.usd_per_hour, f"catalog {catalog.date} ({od_cat.source})"
                else:
                    unpriced.setdefault((platform, region), set()).add(inst.name)
                    continue
                for market in cand.markets:
                    opt = _price_option(catalog, quotes, inst, count, platform, region, market, od, od_src,
                                        times, fit, tp, feed, n_acc, cons.max_spot_wait_hours, exclude)
                    if opt is not None:
                        options.append(opt)

    for (platform, region), types in sorted(unpriced.items()):
        warnings.append(f"{region}: no {platform} On-Demand price for {', '.join(sorted(types))} in the catalog "
                        f"{'or the Pricing API' if quotes.source == 'live' else '(offline)'}; those "
                        f"{platform} options are left out")

    # constraints
    kept: list[risk.Priced] = []
    for priced in options:
        o = priced.option
        if cons.deadline_hours is not None and o.wall_hours > cons.deadline_hours:
            exclude(o.instance_type, o.count, f"misses the deadline: {o.wall_hours:.1f} h expected > "
                                              f"{cons.deadline_hours:g} h", platform=o.platform, market=o.market,
                    region=o.region)
        elif cons.budget_usd is not None and o.expected_cost_usd > cons.budget_usd:
            exclude(o.instance_type, o.count, f"over budget: ${o.expected_cost_usd:,.0f} expected > "
                                              f"${cons.budget_usd:,.0f}", platform=o.platform, market=o.market,
                    region=o.region)
        else:
            kept.append(priced)
    kept = [risk.Priced(risk.with_spread(p), p.model, p.input_limit_ratio) for p in kept]

    def key(p: risk.Priced):
        o = p.option
        primary = {"cost": o.expected_cost_usd, "p90-cost": o.cost_p90_usd}.get(request.objective, o.wall_hours)
        secondary = o.wall_hours if request.objective != "time" else o.expected_cost_usd
        # Layouts the account cannot launch (over quota) go after those it can, whatever their price.
        return (o.quota_ok is False, primary, secondary, o.instance_type, o.count, o.platform, o.region)

    kept.sort(key=key)
    ordered = [p.option for p in kept]
    front = _pareto(ordered)
    ranked = [o.model_copy(update={"rank": i + 1, "pareto": i in front,
                                   "why": _ranking_words(o, i, ordered, request.objective) + o.why})
              for i, o in enumerate(ordered)]
    if not ranked:
        warnings.append("no layout is left: see the excluded layouts (--show-excluded) for why")
    elif (line := risk.sensitivity(kept, request.objective)) is not None:
        warnings.append(line)
    return Plan(spec=request.spec_path or spec.name, spec_name=spec.name, source=quotes.source,
                catalog_date=catalog.date, objective=request.objective, options=tuple(ranked),
                excluded=tuple(excluded), warnings=tuple(warnings))


def _job_times(spec: JobSpec, shape: perf.ModelShape, inst: InstanceType, count: int, strategy: str,
               n_ranks: int, samples_per_s: float) -> risk.JobTimes:
    """The run's work and checkpoint times at this throughput (what the run model interrupts and restarts)."""
    cons = spec.constraints
    # DDP: rank 0 writes the whole state; FSDP: every node writes its shard in parallel.
    ckpt_bytes = shape.params * perf.state_bytes_per_param(shape.optimizer)
    ckpt_s = ckpt_bytes / (count if strategy == "fsdp" else 1) / CHECKPOINT_WRITE_BYTES_PER_S
    ckpt_share = ckpt_s / (cons.checkpoint_interval_minutes * 60.0)
    base_hours = spec.workload.total_samples / samples_per_s / 3600.0
    return risk.JobTimes(work_hours=base_hours * (1 + ckpt_share),
                         step_s=spec.workload.batch_size_per_accelerator * n_ranks / samples_per_s,
                         checkpoint_s=ckpt_s, interval_hours=cons.checkpoint_interval_minutes / 60.0,
                         restart_minutes=cons.restart_minutes, accelerator_kind=inst.accelerator.kind)


@dataclass(frozen=True)
class _Feed:
    samples_per_s: float
    bound: bool
    ratio: float | None      # modelled rate / input capacity (None: no CPU work per sample)
    words: str | None


def _input_limit(spec: JobSpec, inst: InstanceType, count: int, samples_per_s: float) -> _Feed:
    """Cap the layout's throughput at what its CPUs can feed (trainctl/input_pipeline.py)."""
    source = spec.input_source
    if source is None:
        return _Feed(samples_per_s, False, None, "input pipeline not modelled: set workload.data_source")
    cap = input_pipeline.node_capacity(source, inst.vcpus, inst.accelerator_count)
    capped, bound = input_pipeline.capped_throughput(samples_per_s, count, cap)
    ratio = samples_per_s / (cap.samples_per_s * count) if cap.samples_per_s else None
    words = cap.words(capped / count)
    if bound:
        words = (f"INPUT-BOUND: {words}; capped from {samples_per_s:,.0f} to {capped:,.0f} samples/s "
                 "(more vCPUs per accelerator, or data prepared offline, would lift it)")
    return _Feed(capped, bound, ratio, words)


def _spot_price(catalog, quotes, inst, count, platform, region, market, od, exclude):
    """(hourly price per node, its source words, band, AZ, placement score, capacity odds) or None if unpriced."""
    advice = catalog.spot_advice(region, inst.name)
    band = advice.interruption_band if advice else UNKNOWN_BAND
    spot = quotes.spot_prices.get((region, inst.name), {})
    scores = quotes.placement_scores.get((region, inst.name, count), {})
    az = score = odds = None
    if scores:
        # Best AZ: highest placement score, then lowest Spot price there.
        az = max(scores, key=lambda z: (scores[z], -(spot[z].mean_usd if z in spot else 1e9)))
        score = scores[az]
        odds = score / 10.0
    ec2_od = quotes.on_demand.get(("ec2", region, inst.name))
    if ec2_od is None and (cat_price := catalog.on_demand_price("ec2", region, inst.name)) is not None:
        ec2_od = cat_price.usd_per_hour
    if spot and (az in spot or az is None):
        sp = spot[az] if az in spot else min(spot.values(), key=lambda s: s.mean_usd)
        discount = 1 - sp.mean_usd / ec2_od if ec2_od else None
        if platform == "ec2":
            return sp.mean_usd, f"Spot price history, {sp.window_hours:g} h mean", band, az, score, odds
        if discount is not None:
            return (od * (1 - discount), f"SageMaker On-Demand x (1 - EC2 Spot discount {discount:.0%}) (assumption)",
                    band, az, score, odds)
        exclude(inst.name, count, "no EC2 On-Demand price to turn the Spot price into a discount",
                platform=platform, market=market, region=region)
        return None
    if advice is not None:
        src = f"On-Demand x (1 - {advice.savings_pct:g}% Spot advisor savings, {catalog.data_dates['spot_advisor']})"
        if platform == "sagemaker":
            src += " (assumes managed Spot matches the EC2 Spot discount)"
        return od * (1 - advice.savings_pct / 100.0), src, band, az, score, odds
    exclude(inst.name, count, f"no Spot price or Spot advisor data for {region}", platform=platform,
            market=market, region=region)
    return None


def _price_option(catalog, quotes, inst, count, platform, region, market, od, od_src, times, fit, tp, feed,
                  n_ranks, cons_wait, exclude) -> risk.Priced | None:
    why: list[str] = []
    az = score = band = None
    odds: float | None = 1.0
    if market == "on-demand":
        hourly_node, price_src = od, od_src
    else:
        got = _spot_price(catalog, quotes, inst, count, platform, region, market, od, exclude)
        if got is None:
            return None
        hourly_node, price_src, band, az, score, odds = got
    model, risk_words = risk.run_model(platform, market, count, hourly_node, times, odds, band, load_hazard_table(),
                                       CAPACITY_RETRY_HOURS)
    if market == "spot" and model.event_rate * model.lost_per_event >= 0.5:
        exclude(inst.name, count, f"interrupted too often for its checkpoint interval ({band} band)",
                platform=platform, market=market, region=region)
        return None
    if odds is not None and odds < 1.0 and model.capacity_wait() > cons_wait:
        exclude(inst.name, count, f"Spot capacity unlikely: placement score {score}/10 means "
                                  f"~{model.capacity_wait():.1f} h expected wait > max_spot_wait_hours {cons_wait:g}",
                platform=platform, market=market, region=region)
        return None
    exp = simulate.expected(model)
    if market == "spot":
        assumed = "" if catalog.spot_advice(region, inst.name) else " (assumed: no advisor data)"
        why.append(f"Spot: interruption band {band}{assumed} -> {exp.interruptions:.2f} interruptions expected")
        why.append(f"placement score {score}/10 for {count} node{'s' if count > 1 else ''} in {az}"
                   + (" (capacity unlikely)" if score <= 3 else "") if score is not None else
                   "placement score unknown (offline, or the score call was refused): capacity odds not checked")
    why.extend(risk_words)
    quota_ok = _quota_check(catalog, quotes, inst, count, platform, region, market, why)
    why.extend(tp.words)
    if feed.words:
        why.append(feed.words)
    if fit.strategy == "fsdp":
        why.append(f"model sharded (fsdp): {fit.total_gib:.1f} of {fit.usable_gib:.1f} GiB per accelerator")
    why.append(f"price: {price_src}")
    option = Option(rank=0, platform=platform, instance_type=inst.name, count=count, market=market, region=region,
                    availability_zone=az, accelerators=n_ranks, hourly_usd=hourly_node * count,
                    throughput_samples_per_s=feed.samples_per_s, throughput_source=tp.source,
                    throughput_band=tp.band, network_assumed=tp.network, hours=exp.billed_hours,
                    expected_cost_usd=exp.cost_usd, spot_placement_score=score,
                    interruptions_expected=exp.interruptions, fits_memory=True, pareto=False, why=tuple(why),
                    strategy=fit.strategy, capacity_odds=odds, wall_hours=exp.wall_hours, quota_ok=quota_ok,
                    price_source=price_src, input_bound=feed.bound)
    return risk.Priced(option, model, feed.ratio)


def _quota_check(catalog, quotes, inst, count, platform, region, market, why) -> bool | None:
    if platform == "ec2":
        code, name = catalog.ec2_quota(inst.name, market)
        have = quotes.quotas.get((region, "ec2", name))
        need = inst.vcpus * count
        unit = "vCPUs"
    else:
        name = f"ml.{inst.name} for {'spot ' if market == 'spot' else ''}training job usage"
        have = quotes.quotas.get((region, "sagemaker", name))
        need, unit = count, "instances"
    if have is None:
        return None
    if need > have:
        why.append(f"over quota: needs {need} {unit}, '{name}' is {have:g} in {region}; request an increase in "
                   "Service Quotas")
        return False
    return True


def _ranking_words(o: Option, i: int, ranked: list[Option], objective: str) -> tuple[str, ...]:
    """One line saying why this option sits where it does."""
    if not ranked:
        return ()
    best = ranked[0]
    if i == 0:
        runner = next((r for r in ranked[1:] if r.market != o.market or r.instance_type != o.instance_type), None)
        if objective == "p90-cost":
            line = f"lowest 90th-percentile cost: ${o.cost_p90_usd:,.2f} (expected ${o.expected_cost_usd:,.2f})"
            if runner:
                line += (f", ${runner.cost_p90_usd - o.cost_p90_usd:,.2f} less at p90 than the next layout "
                         f"({runner.instance_type} x{runner.count} {runner.market})")
        elif objective == "cost":
            line = f"lowest expected cost: ${o.expected_cost_usd:,.2f}"
            if runner:
                line += (f", ${runner.expected_cost_usd - o.expected_cost_usd:,.2f} less than the next layout "
                         f"({runner.instance_type} x{runner.count} {runner.market})")
        else:
            line = f"fastest: {o.wall_hours:.2f} h"
            if runner:
                line += f", {runner.wall_hours - o.wall_hours:.2f} h sooner than {runner.instance_type} x{runner.count}"
        return (line,)
    if objective == "p90-cost":
        return (f"${o.cost_p90_usd - best.cost_p90_usd:,.2f} more than #1 at p90",)
    if objective == "cost":
        return (f"${o.expected_cost_usd - best.expected_cost_usd:,.2f} more than #1"
                + (f", {best.hours - o.hours:.2f} h faster" if o.hours < best.hours else ""),)
    return (f"{o.wall_hours - best.wall_hours:.2f} h slower than #1"
            + (f", ${best.expected_cost_usd - o.expected_cost_usd:,.2f} cheaper" if
               o.expected_cost_usd < best.expected_cost_usd else ""),)
