"""Pricing a flexible layout: N nodes, each any of several types with the same accelerators (spec/flexible.py).

The launch asks for identical nodes (EC2 Fleet's SingleInstanceType): a mix would run at the pace of its
slowest node (the input pipeline of its fewest vCPUs, the ring at its lowest baseline bandwidth) while billing
its dearest, so trainctl does not mix. Each type is then priced as the whole layout made of it (its throughput,
its price) and the flexible option is the worst of them: the highest expected cost among the types the fleet
may get. Its throughput and `instance_type` are that type's. The Spot data gives no odds per type to weight the
types with (a placement score is for the whole set), so no mix is weighted. Its capacity odds come from a
placement score asked for exactly its set of types and its node count. Its types are listed by expected cost,
lowest first: the order of the launch's priorities.
"""
from __future__ import annotations

from trainctl.catalog import images
from trainctl.catalog.platforms import facts as platform_facts
from trainctl.planner.data_terms import layout_data
from trainctl.planner.pricing import MIN_SCORE_TYPES, input_limit, job_times, price_option, spot_price
from trainctl.planner.spot import risk


def score_key(types) -> str:
    """The key of a flexible set's placement score in Quotes (the types sorted, joined by '|')."""
    return "|".join(sorted(types))


def flexible_options(run, cand, throughput) -> list[risk.Priced]:
    """Every (platform, region, market) option of a flexible candidate; `run` is the planner's _Planning."""
    fitted = run.fit(cand.instance, cand.count)
    if fitted is None:
        return []
    fits, n_acc = fitted
    out = []
    for platform in run.platforms:
        # offered on the platform, and driven by the image the platform would boot (catalog/images.py)
        members = [m for m in cand.members if platform_facts(platform).offers(m)
                   and images.drives(platform, m.family, m.accelerator.key, m.accelerator.kind) is None]
        if len(members) < 2:
            run.exclude(cand.group, cand.count, "fewer than two of its types are offered here, on an image that "
                        "drives them", platform=platform)
            continue
        rates = {m.name: _member_rate(run, m, cand.count, platform, fits, throughput, n_acc) for m in members}
        for region in run.regions:
            prices = {m.name: run.on_demand(platform, region, m) for m in members}
            if any(p is None for p in prices.values()):
                continue
            for market in cand.markets:
                priced = {m.name: _member_option(run, cand, members, m, platform, region, market, prices[m.name],
                                                 rates[m.name], n_acc) for m in members}
                if any(p is None for p in priced.values()):
                    continue
                # the hard cap: the layout on its dearest type at On-Demand, what EC2 caps a Spot price at when
                # no maximum is given (EC2 User Guide, Spot pricing): Spot price moves never rule out a type
                cap = cand.count * max(p[0] for p in prices.values())
                out.append(_worst(cand, members, platform, market, priced, cap))
    return out


def _member_rate(run, member, count: int, platform: str, fits, throughput, n_acc: int):
    """(memory fit, throughput estimate, input-capped feed, job times) of the layout made of this member only."""
    fit, tp = max(((f, throughput(run.spec, run.shape, member, count, platform, run.measured, f, run.catalog))
                   for f in fits), key=lambda pair: (pair[1].samples_per_s, pair[0].strategy != "hsdp"))
    feed = input_limit(run.spec, member, count, tp.samples_per_s)
    return fit, tp, feed, job_times(run.spec, run.shape, member, count, fit.strategy, n_acc, feed.samples_per_s)


def _set_score(run, cand, members, region: str):
    """(AZ, score, odds) of the placement score asked for exactly this set of types and node count."""
    scores = run.quotes.placement_scores.get((region, score_key(m.name for m in members), cand.count), {})
    if not scores:
        return None, None, None
    def dearness(z: str) -> float:   # on a tie of scores, the AZ where its types cost least (as a fixed layout)
        prices = [run.quotes.spot_prices.get((region, m.name), {}).get(z) for m in members]
        return sum(p.mean_usd if p else 1e9 for p in prices)

    az = max(scores, key=lambda z: (scores[z], -dearness(z), z))
    return az, scores[az], (scores[az] / 10.0 if len(members) >= MIN_SCORE_TYPES else None)


def _member_option(run, cand, members, member, platform, region, market, price, rate, n_acc):
    """The layout made of `member` alone, with the set's placement score and the quota of its widest type."""
    fit, tp, feed, times = rate
    feed, times, data = layout_data(run, member, cand.count, platform, region, fit, tp, feed, n_acc)
    quote = None
    if market == "spot":
        own = spot_price(run.catalog, run.quotes, member, cand.count, platform, region, market, price[0],
                         run.exclude)
        if own is None:
            return None
        az, score, odds = _set_score(run, cand, members, region)
        history = run.quotes.spot_prices.get((region, member.name), {})
        on_history = platform_facts(platform).spot_price == "ec2-history"
        hourly = history[az].mean_usd if on_history and az in history else own[0]  # the set's AZ
        quote = (hourly, own[1], own[2], az, score, odds)
    widest = max(members, key=lambda m: (m.vcpus, m.name))   # identical nodes: the fleet may get all of them
    return price_option(run.catalog, run.quotes, member, cand.count, platform, region, market, *price, times, fit,
                        tp, feed, n_acc, run.spec.constraints.max_spot_wait_hours, run.exclude, spot_quote=quote,
                        quota_inst=widest, score_key=score_key(m.name for m in members), data=data)


def _worst(cand, members, platform: str, market: str, priced: dict, cap: float) -> risk.Priced:
    """The flexible option: the member option of the highest expected cost, listing every type by cost."""
    order = tuple(sorted(priced, key=lambda t: (priced[t].option.expected_cost_usd, t)))
    worst = priced[order[-1]]
    best = priced[order[0]].option
    lines = [f"flexible: {cand.count} identical node{'s' if cand.count > 1 else ''} of any of "
             f"{', '.join(m.name for m in members)}; priced on the worst, {worst.option.instance_type} "
             f"(${worst.option.expected_cost_usd:,.2f}); the best, {best.instance_type}, "
             f"${best.expected_cost_usd:,.2f}"]
    if market == "spot" and len(members) < MIN_SCORE_TYPES:
        lines.append(f"placement score not asked: {len(members)} types score low by AWS's design")
    own = platform_facts(platform)
    if own.one_type_per_job:
        lines.append(f"{own.title} takes one type per job: an ordered failover across {', '.join(order)} "
                     "(`launch --failover` moves on when a type gets no capacity)")
    else:
        lines.append(f"{own.title}: one fleet per AZ over {', '.join(order)} (priorities in that order), "
                     "all or nothing, "
                     + (f"at most ${cap:,.2f}/h (MaxTotalPrice: its dearest type On-Demand)" if market == "on-demand"
                        else "no MaxTotalPrice (AWS advises against it on Spot: more interruptions)"))
    option = worst.option.model_copy(update={"instance_types": order, "flexible_group": cand.group,
                                             "hourly_cap_usd": cap,
                                             "why": tuple(lines) + worst.option.why})
    return risk.Priced(option, worst.model, worst.input_limit_ratio, worst.extra_usd)
