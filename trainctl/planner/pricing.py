"""Pricing one layout on one platform, region and market: its price per hour (On-Demand, Spot history or the
Spot advisor), the run model (interruptions, waits, restarts, start-up billing), the input-pipeline cap, the
quota check and the typed `Option` with the lines that explain it. Pure, like the planner that calls it.
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass

from trainctl import perf
from trainctl.catalog import images
from trainctl.catalog.platforms import facts as platform_facts
from trainctl.perf import input_pipeline
from trainctl.planner.spot import risk
from trainctl.planner.spot import simulation as simulate
from trainctl.catalog import InstanceType
from trainctl.planner.spot.hazard import load_hazard_table
from trainctl.plans import Option
from trainctl.spec import JobSpec

# When a Spot request is refused, the next try comes after about this long (the placement score is
# re-asked and another AZ or option is tried); used to turn capacity odds into an expected wait.
CAPACITY_RETRY_HOURS = 0.5
# Pessimistic band for a type the Spot advisor has no data for.
UNKNOWN_BAND = ">20%"
MIN_SCORE_TYPES = 3  # AWS: a placement-score request of fewer instance types always scores low
# Checkpoints are written to local disk and synced in the background; ~500 MB/s sustained.
CHECKPOINT_WRITE_BYTES_PER_S = 500e6


def job_times(spec: JobSpec, shape: perf.ModelShape, inst: InstanceType, count: int, strategy: str,
               n_ranks: int, samples_per_s: float) -> risk.JobTimes:
    """The run's work and checkpoint times at this throughput (what the run model interrupts and restarts)."""
    cons = spec.constraints
    # DDP: rank 0 writes the whole state; FSDP: every node writes its shard in parallel.
    ckpt_bytes = shape.params * perf.state_bytes_per_param(shape.optimizer)
    ckpt_s = ckpt_bytes / (count if strategy in perf.SHARDED else 1) / CHECKPOINT_WRITE_BYTES_PER_S
    ckpt_share = ckpt_s / (cons.checkpoint_interval_minutes * 60.0)
    base_hours = spec.workload.total_samples / samples_per_s / 3600.0
    return risk.JobTimes(work_hours=base_hours * (1 + ckpt_share),
                         step_s=spec.workload.batch_size_per_accelerator * n_ranks / samples_per_s,
                         checkpoint_s=ckpt_s, interval_hours=cons.checkpoint_interval_minutes / 60.0,
                         restart_minutes=cons.restart_minutes, accelerator_kind=inst.accelerator.kind,
                         elastic_min_nodes=spec.elastic.min_nodes if spec.elastic else 0,
                         on_spot_shortage=cons.on_spot_shortage, max_spot_wait_hours=cons.max_spot_wait_hours,
                         deadline_hours=cons.deadline_hours)


@dataclass(frozen=True)
class _Feed:
    samples_per_s: float
    bound: bool
    ratio: float | None      # modelled rate / input capacity (None: no CPU work per sample)
    words: str | None


Feed = _Feed   # what planner/data_terms.py caps further


def input_limit(spec: JobSpec, inst: InstanceType, count: int, samples_per_s: float) -> _Feed:
    """Cap the layout's throughput at what its CPUs can feed (trainctl/perf/input_pipeline.py)."""
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


def spot_price(catalog, quotes, inst, count, platform, region, market, od, exclude):
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
        config = quotes.score_configs.get((region, inst.name, count), ())
        # AWS: fewer than three instance types always score low, so such a score says nothing about the odds
        odds = score / 10.0 if len(config) >= MIN_SCORE_TYPES or not config else None
    own = platform_facts(platform)
    ec2_od = quotes.on_demand.get(("ec2", region, inst.name))
    if ec2_od is None and (cat_price := catalog.on_demand_price("ec2", region, inst.name)) is not None:
        ec2_od = cat_price.usd_per_hour
    if spot and (az in spot or az is None):
        az = az or min(spot, key=lambda z: spot[z].mean_usd)   # unscored: the AZ its price comes from
        sp = spot[az]
        discount = 1 - sp.mean_usd / ec2_od if ec2_od else None
        if own.spot_price == "ec2-history":
            return sp.mean_usd, f"Spot price history, {sp.window_hours:g} h mean", band, az, score, odds
        if discount is not None:
            return (od * (1 - discount), f"{own.title} On-Demand x (1 - EC2 Spot discount {discount:.0%}) "
                    "(assumption)", band, az, score, odds)
        exclude(inst.name, count, "no EC2 On-Demand price to turn the Spot price into a discount",
                platform=platform, market=market, region=region)
        return None
    if advice is not None:
        src = f"On-Demand x (1 - {advice.savings_pct:g}% Spot advisor savings, {catalog.data_dates['spot_advisor']})"
        if own.spot_price == "ec2-discount":
            src += " (assumes managed Spot matches the EC2 Spot discount)"
        return od * (1 - advice.savings_pct / 100.0), src, band, az, score, odds
    exclude(inst.name, count, f"no Spot price or Spot advisor data for {region}", platform=platform,
            market=market, region=region)
    return None


def _score_words(quotes, itype: str, count: int, region: str, az, score, odds) -> str:
    if score is None:
        return ("placement score unknown (offline, refused, or not asked: see the warnings): capacity odds not "
                "checked")
    where = f"placement score {score}/10 for {count} node{'s' if count > 1 else ''} in {az}"
    if odds is None:
        config = quotes.score_configs.get((region, itype, count), ())
        return (f"{where}, asked for {len(config)} type{'s' if len(config) != 1 else ''} ({', '.join(config)}): "
                "low by AWS's design below three types, so not taken as capacity odds")
    return where + (" (capacity unlikely)" if score <= 3 else "")


def price_option(catalog, quotes, inst, count, platform, region, market, od, od_src, times, fit, tp, feed,
                  n_ranks, cons_wait, exclude, spot_quote=None, quota_inst=None,
                  score_key: str | None = None, data=None) -> risk.Priced | None:
    """`spot_quote`, `quota_inst`, `score_key`: a flexible layout's Spot price (what `spot_price` returns), the
    member its quota is checked on and the key of its placement score (planner/flexible.py). `data`: the layout's
    input-data terms (planner/data_terms.py LayoutData), None without `data:` in the spec."""
    why: list[str] = []
    az = score = band = None
    odds: float | None = 1.0
    if market == "on-demand":
        hourly_node, price_src = od, od_src
    else:
        got = spot_quote or spot_price(catalog, quotes, inst, count, platform, region, market, od, exclude)
        if got is None:
            return None
        hourly_node, price_src, band, az, score, odds = got
        if "On-Demand x" in price_src:  # a discount off the On-Demand price: say where that price came from
            price_src += f"; On-Demand price: {od_src}"
    model, risk_words = risk.run_model(platform, market, count, hourly_node, times, odds, band, load_hazard_table(),
                                       CAPACITY_RETRY_HOURS, od)
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
    terms, data_usd = data.option_terms(platform, count, exp.interruptions, model.same_event_p) if data else (None, 0.0)
    if market == "spot":
        assumed = "" if catalog.spot_advice(region, inst.name) else " (assumed: no advisor data)"
        why.append(f"Spot: interruption band {band}{assumed} -> {exp.interruptions:.2f} interruptions expected")
        why.append(_score_words(quotes, score_key or inst.name, count, region, az, score, odds))
    why.extend(risk_words + risk.recovery_words(model, exp))
    quota_ok = quota_check(catalog, quotes, quota_inst or inst, count, platform, region, market, why)
    why.extend(tp.words)
    if feed.words:
        why.append(feed.words)
    if data is not None:
        why.extend(data.words + data.dollar_words(terms))
    if fit.strategy in perf.SHARDED:
        how = "within each node, replicated across nodes (hsdp)" if fit.strategy == "hsdp" else "(fsdp)"
        why.append(f"model sharded {how}: {fit.total_gib:.1f} of {fit.usable_gib:.1f} GiB per accelerator")
    if fit.grad_accum > 1:
        why.append(f"micro-batch {fit.micro_batch} x {fit.grad_accum} accumulated: the largest micro-batch "
                   "that fits")
    why.append(images.plan_words(platform, inst.accelerator.kind, datetime.date.today().isoformat()))
    why.append(f"price: {price_src}")
    option = Option(rank=0, platform=platform, instance_type=inst.name, count=count, market=market, region=region,
                    availability_zone=az, accelerators=n_ranks, hourly_usd=hourly_node * count,
                    throughput_samples_per_s=feed.samples_per_s, throughput_source=tp.source,
                    throughput_band=tp.band, network_assumed=tp.network, hours=exp.billed_hours,
                    expected_cost_usd=exp.cost_usd + data_usd, spot_placement_score=score,
                    interruptions_expected=exp.interruptions, fits_memory=True, pareto=False, why=tuple(why),
                    strategy=fit.strategy, micro_batch=fit.micro_batch, grad_accum=fit.grad_accum,
                    capacity_odds=odds, wall_hours=exp.wall_hours, quota_ok=quota_ok,
                    price_source=price_src, input_bound=feed.bound, data=terms)
    return risk.Priced(option, model, feed.ratio, data_usd)


@dataclass(frozen=True)
class QuotaNeed:
    """What one layout draws on one Service Quota, and what the account has (None: not read)."""
    service: str      # ec2 | sagemaker
    code: str         # QuotaCode ("" when the quota was not read: SageMaker's are known by name)
    name: str
    region: str
    need: float
    have: float | None
    unit: str

    @property
    def named(self) -> str:
        return f"'{self.name}'" + (f" ({self.code})" if self.code else "")

    def increase_command(self, desired: float | None = None) -> str:
        """The AWS CLI request for the quota this layout needs (Service Quotas RequestServiceQuotaIncrease)."""
        return (f"aws service-quotas request-service-quota-increase --service-code {self.service} --quota-code "
                f"{self.code or 'CODE'} --desired-value {desired or self.need:g} --region {self.region}")


def quota_need(catalog, quotes, inst, count, platform, region, market) -> QuotaNeed:
    own = platform_facts(platform)
    if own.type_quota is None:   # vCPUs of the family's quota
        code, name = catalog.ec2_quota(inst.name, market)
        # by QuotaCode: names change (P became "P4, P3 and P2")
        have = quotes.quotas.get((region, own.quota_service, code))
        return QuotaNeed(own.quota_service, code, name, region, inst.vcpus * count, have, "vCPUs")
    name = own.quota_name(inst.name, market)
    key = (region, own.quota_service, name)
    return QuotaNeed(own.quota_service, quotes.quota_codes.get(key, ""), name, region, count, quotes.quotas.get(key),
                     "instances")


def quota_check(catalog, quotes, inst, count, platform, region, market, why) -> bool | None:
    q = quota_need(catalog, quotes, inst, count, platform, region, market)
    if q.have is None:
        return None
    if q.need > q.have:
        why.append(f"over quota: needs {q.need:g} {q.unit}, {q.named} is {q.have:g} in {region}; request an "
                   f"increase: `{q.increase_command()}`")
        return False
    return True


def objective_value(o: Option, objective: str) -> tuple[float, float]:
    """What the plan ranks by (expected cost, p90 cost or wall hours), then the tie-break: the quota aside."""
    primary = {"cost": o.expected_cost_usd, "p90-cost": o.cost_p90_usd or o.expected_cost_usd}.get(objective,
                                                                                                  o.wall_hours)
    return primary, (o.wall_hours if objective != "time" else o.expected_cost_usd)


def over_quota_warning(ranked: list[Option], catalog, quotes, objective: str) -> str | None:
    """One warning when the options the plan would rank first are over quota (they rank after those within it):
    which quotas hold them back, by name and code, and the request that lifts each."""
    within = next((o for o in ranked if o.quota_ok is not False), None)
    held = [o for o in ranked if o.quota_ok is False and
            (within is None or objective_value(o, objective) < objective_value(within, objective))]
    if not held:
        return None
    held.sort(key=lambda o: objective_value(o, objective))
    needs: dict[tuple[str, str, str], tuple[QuotaNeed, Option]] = {}
    for o in held:
        q = quota_need(catalog, quotes, catalog.instance(o.instance_type), o.count, o.platform, o.region, o.market)
        needs.setdefault((q.service, q.name, q.region), (q, o))  # the cheapest option's need of each quota
    lifts = "; ".join(f"{q.named} in {q.region} is {q.have:g} {q.unit}, {o.count}x {o.instance_type} {o.market} "
                      f"needs {q.need:g}: `{q.increase_command()}`" for q, o in needs.values())
    best = (f"; the best within quota is #{within.rank}, {within.count}x {within.instance_type} {within.market} on "
            f"{within.platform} in {within.region}" if within else "; no option fits the quotas")
    n = len(held)
    return (f"the {n} option{'s' if n != 1 else ''} the plan would rank first {'are' if n != 1 else 'is'} over "
            f"quota and ranked after those within it{best}. To launch them: {lifts}")
