"""Spot placement scores for the plan: which configurations are asked (instance types, node count, units, single
AZ), the jobs that ask them, and how their answers become the plan's scores. An account may ask only a limited number
of new configurations per 24 h (MaxConfigLimitExceeded), so each configuration is asked once per plan and shared,
through the disk cache, with launch and doctor."""
from __future__ import annotations

from trainctl.aws import clients as aws
from trainctl.aws.disk_cache import DiskCache, cached, caller_account
from trainctl.catalog import Catalog

MIN_TYPES_PER_SCORE = 3  # AWS: fewer types always score low, so such a configuration is not worth a new one


def score_group(catalog: Catalog, instance_type: str) -> list[str]:
    """The placement-score configuration asked for a type (awsinfra.zones.score_types: the family's sizes, padded
    with types of its accelerator). One configuration per family and count, whoever asks (plan, launch, doctor):
    an account may ask only a limited number of new configurations per 24 h (MaxConfigLimitExceeded), and a score
    compares only with scores of the same configuration. Fewer than three types still score low by AWS's design."""
    from trainctl.aws import zones

    return zones.score_types(catalog, instance_type)


def score_groups(catalog: Catalog, types: list[str]) -> list[list[str]]:
    return [list(g) for g in sorted({tuple(score_group(catalog, t)) for t in types})]


def placement_scores_for(ec2, region: str, instance_type: str, count: int,
                         types=None) -> tuple[dict[str, int], tuple[str, ...]]:
    """(AZ name -> score, the configuration's types) for `count` x `instance_type` (or a flexible layout's
    `types`): the plan's configuration, read from the plan's cache when it is fresh, so launch and doctor spend
    no new configuration."""
    from trainctl.aws import zones
    from trainctl.catalog import load_catalog

    group = sorted(types) if types else score_group(load_catalog(), instance_type)
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


def submit_scores(pool, cache: DiskCache, req, region: str, groups: list[list[str]], counts: list[int],
                  jobs: dict[tuple, object]) -> None:
    """Add to `jobs` one placement-score job per configuration the plan asks in `region`."""
    for group in groups:
        for c in counts:
            if any(c in req.spot_counts.get(t, ()) for t in group):
                jobs[("score", region, tuple(group), c)] = pool.submit(
                    cached, cache, {"op": "score", "region": region, "types": group, "count": c},
                    lambda r=region, g=group, n=c: _placement_scores(r, g, n))
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
            for t in group:
                if c in req.spot_counts.get(t, ()):
                    scores_out[(region, t, c)] = by_name
                    configs[(region, t, c)] = tuple(group)
            if c in req.flexible_sets.get(tuple(group), ()):   # a flexible layout's own configuration
                scores_out[(region, "|".join(group), c)] = by_name
                configs[(region, "|".join(group), c)] = tuple(group)


def score_refusals(errors: dict, live_regions: list[str]) -> list[str]:
    """One warning per family whose placement scores AWS refused (p3 gets InvalidParameterValue: AWS does not
    score every type), with the regions, node counts and reason: its Spot options stay, with the score unknown."""
    grouped: dict[tuple[tuple[str, ...], str], tuple[set[str], set[int]]] = {}
    for key, e in errors.items():
        if key[0] == "score" and key[1] in live_regions:
            regions, counts = grouped.setdefault((key[2], aws.error_summary(e)), (set(), set()))
            regions.add(key[1])
            counts.add(key[3])
    out = []
    for (types, why), (regions, counts) in sorted(grouped.items()):
        families = sorted({t.split(".")[0] for t in types})
        out.append(f"no Spot placement scores for {', '.join(families)} ({', '.join(types)}) in "
                   f"{', '.join(sorted(regions))} for {', '.join(f'x{c}' for c in sorted(counts))}: "
                   f"GetSpotPlacementScores refused ({why}); those Spot options keep their place with the score "
                   "unknown")
    return out
