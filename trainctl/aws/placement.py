"""Spot placement scores for the plan: which configurations are asked (instance types, node count, units, single
AZ), the jobs that ask them, and how their answers become the plan's scores. An account may ask only a limited number
of new configurations per 24 h (MaxConfigLimitExceeded), so each configuration is asked once per plan and shared,
through the disk cache, with launch and doctor."""
from __future__ import annotations

from trainctl.aws.workers import interruptible_pool
from dataclasses import replace

from trainctl.aws import clients as aws
from trainctl.aws.disk_cache import DiskCache, cached, caller_account

MIN_TYPES_PER_SCORE = 3  # AWS: fewer types always score low, so such a configuration is not worth a new one
# New single-type configurations one plan asks: those of its best-ranked fixed Spot layouts, as many as the table
# shows by default (--top 10). AWS limits new configurations per account per 24 h without publishing the number
# (EC2 User Guide, Spot placement score, Limitations); one per family and count was the plan's spend before.
FIXED_SCORES_PER_PLAN = 10


def placement_scores_in(region: str, instance_type: str, count: int) -> tuple[dict[str, int], tuple[str, ...]]:
    """placement_scores_for with the region's EC2 client (GetSpotPlacementScores is an EC2 API, whichever
    platform runs the job)."""
    from trainctl.aws import clients as aws

    return placement_scores_for(aws.client("ec2", region), region, instance_type, count)


def placement_scores_for(ec2, region: str, instance_type: str, count: int, types=None,
                         cache: DiskCache | None = None) -> tuple[dict[str, int], tuple[str, ...]]:
    """(AZ name -> score, the configuration's types) for exactly the request a launch makes: `count` x
    `instance_type` alone, or a flexible layout's `types` (EC2 User Guide: a score "is only relevant if your Spot
    request has exactly the same configuration"). Read from the plan's cache when it is fresh, so launch and doctor
    spend no configuration the plan already asked."""
    from trainctl.aws import zones

    group = sorted(types) if types else [instance_type]
    if cache is None:
        try:
            cache = DiskCache(caller_account(region))
        except Exception:  # noqa: BLE001 - without the account there is no cache to share, only the same question
            cache = DiskCache("", ttl_s=0)
    by_id = cached(cache, {"op": "score", "region": region, "types": group, "count": count},
                   lambda: zones.placement_scores(ec2, region, group, count))
    names = cached(cache, {"op": "azs", "region": region}, lambda: zones.az_ids_to_names(ec2))
    return {names[z]: s for z, s in by_id.items() if z in names}, tuple(group)


def _placement_scores(region: str, types: list[str], count: int) -> dict[str, int]:
    """AZ id -> score: the one query shared with the EC2 backend and doctor (awsinfra.zones)."""
    from trainctl.aws import zones

    return zones.placement_scores(aws.client("ec2", region), region, types, count)


def submit_scores(pool, cache: DiskCache, req, region: str, jobs: dict[tuple, object]) -> None:
    """Add to `jobs` the placement-score jobs asked before ranking: each flexible set of three or more types, for
    its own node counts (its score is its capacity odds). Fixed layouts are scored after ranking
    (`with_fixed_scores`): one type scores low by AWS's design, so their scores never change a rank."""
    for types, set_counts in req.flexible_sets.items():
        for c in set_counts if len(types) >= MIN_TYPES_PER_SCORE else ():
            jobs.setdefault(("score", region, tuple(types), c), pool.submit(
                cached, cache, {"op": "score", "region": region, "types": list(types), "count": c},
                lambda r=region, g=list(types), n=c: _placement_scores(r, g, n)))


def assemble_scores(req, region: str, results: dict, az_names: dict[str, str], scores_out: dict,
                    configs: dict) -> None:
    """Each answered configuration's scores (by AZ name) under the key of every layout it was asked for."""
    for key, val in results.items():
        if key[0] == "score" and key[1] == region:
            _, _, group, c = key
            by_name = {az_names.get(zid, zid): s for zid, s in val.items()}
            if c in req.flexible_sets.get(tuple(group), ()):   # a flexible layout's own configuration
                scores_out[(region, "|".join(group), c)] = by_name
                configs[(region, "|".join(group), c)] = tuple(group)


def score_refusals(errors: dict, live_regions: list[str]) -> list[str]:
    """One warning per family and error code whose placement scores AWS refused (p3 gets InvalidParameterValue: AWS
    does not score every type), with the types, regions, node counts and reason: its Spot options stay, with the
    score unknown."""
    grouped: dict[tuple[tuple[str, ...], str], tuple[set[str], set[str], set[int], str]] = {}
    for key, e in sorted(errors.items(), key=lambda kv: repr(kv[0])):
        if key[0] == "score" and key[1] in live_regions:
            why = aws.error_summary(e)
            families = tuple(sorted({t.split(".")[0] for t in key[2]}))
            types, regions, counts, _ = grouped.setdefault((families, why.split(":")[0]), (set(), set(), set(), why))
            types.update(key[2])
            regions.add(key[1])
            counts.add(key[3])
    out = []
    for (families, _), (types, regions, counts, why) in sorted(grouped.items()):
        out.append(f"no Spot placement scores for {', '.join(families)} ({', '.join(sorted(types))}) in "
                   f"{', '.join(sorted(regions))} for {', '.join(f'x{c}' for c in sorted(counts))}: "
                   f"GetSpotPlacementScores refused ({why}); those Spot options keep their place with the score "
                   "unknown")
    return out


def fixed_configurations(options, limit: int = FIXED_SCORES_PER_PLAN) -> tuple[list[tuple[str, str, int]], int]:
    """((region, type, count) of the best-ranked fixed Spot layouts, within `limit` configurations; how many
    configurations were left out). A configuration is the types and count, not the region (the sandbox and the
    guide agree), so another region of one already taken costs nothing."""
    taken: list[tuple[str, str, int]] = []
    configs: list[tuple[str, int]] = []
    left: set[tuple[str, int]] = set()
    for o in options:
        if o.market != "spot" or len(o.instance_types) > 1:
            continue
        config = (o.instance_type, o.count)
        if config not in configs and len(configs) >= limit:
            left.add(config)
            continue
        if config not in configs:
            configs.append(config)
        if (o.region, *config) not in taken:
            taken.append((o.region, *config))
    return taken, len(left)


def with_fixed_scores(quotes, options, refresh: bool = False):
    """`quotes` with the placement score of each best-ranked fixed Spot layout, asked for its exact configuration
    (InstanceTypes=[its type], TargetCapacity=its nodes, units): `quotes` itself when nothing was asked."""
    wanted, left = fixed_configurations(options)
    wanted = [k for k in wanted if k not in quotes.placement_scores]
    if not wanted:
        return quotes
    cache = DiskCache(caller_account(wanted[0][0]), refresh=refresh)
    with interruptible_pool(8) as pool:
        futures = {k: pool.submit(lambda r, t, c: placement_scores_for(aws.client("ec2", r), r, t, c, cache=cache),
                                  *k) for k in wanted}
    scores, configs, errors = dict(quotes.placement_scores), dict(quotes.score_configs), {}
    for (region, itype, count), fut in futures.items():
        try:
            scores[(region, itype, count)], configs[(region, itype, count)] = fut.result()
        except Exception as e:  # noqa: BLE001 - a refused score is a warning; the option keeps its place
            errors[("score", region, (itype,), count)] = e
    warnings = [*quotes.warnings, *score_refusals(errors, list(quotes.regions))]
    if left:
        warnings.append(f"placement scores asked for the {FIXED_SCORES_PER_PLAN} best-ranked fixed Spot layouts "
                        f"only, each for its exact type and node count; {left} more show none: AWS limits new "
                        "score configurations per account per 24 h")
    return replace(quotes, placement_scores=scores, score_configs=configs, warnings=tuple(warnings))

