"""The plan of a spec: `plan` (one pass), and `Planner` for quotes that grow: a live plan ranks the layouts, asks
the placement scores of the best-ranked ones (aws/placement.py), and plans with them, working out again only
what the scores change (planner/ranking.py: _Planning.layout_options)."""
from __future__ import annotations

import dataclasses

from trainctl.catalog import Catalog
from trainctl.perf.estimator import MeasuredRate
from trainctl.planner.quotes import Quotes
from trainctl.planner import bench_choice, capacity_blocks, capacity_reservations, reasons
from trainctl.planner.pricing import over_quota_warning
from trainctl.planner.ranking import PlanRequest, _Planning, candidates
from trainctl.planner.spot import risk
from trainctl.plans import Option, Plan
from trainctl.spec import JobSpec


def plan(spec: JobSpec, catalog: Catalog, quotes: Quotes, request: PlanRequest | None = None,
         measured: dict[tuple[str, int, str], MeasuredRate] | None = None) -> Plan:
    return Planner(spec, catalog, request, measured).plan(quotes)


class Planner:
    """One spec's planning, for quotes that may grow: a live plan ranks the layouts (`ranking`), asks the
    placement scores of the best-ranked ones, and plans with them (`plan`). The ranking of the quotes planned is
    not worked out again, and what the scores do not change (each layout's throughput, the options of the layouts
    not scored) is worked out once."""

    def __init__(self, spec: JobSpec, catalog: Catalog, request: PlanRequest | None = None,
                 measured: dict[tuple[str, int, str], MeasuredRate] | None = None):
        self.spec, self.catalog, self.request, self.measured = spec, catalog, request or PlanRequest(), measured or {}
        self._throughputs: dict = {}      # (type, count, platform, fit) -> Estimate, for every pass
        self._ranked: tuple | None = None  # (quotes, run, ranked, kept, warnings) of the quotes last ranked
        self._layouts: dict = {}          # candidate -> (its scores, its options, what it left out), last pass

    def _rank(self, quotes: Quotes) -> tuple:
        if self._ranked is None or self._ranked[0] is not quotes:
            if self._ranked is None or not _same_but_scores(self._ranked[0], quotes):
                self._layouts = {}
            run = _Planning(self.spec, self.catalog, quotes, self.request, self.measured, self._throughputs,
                            self._layouts)
            options = [o for cand in candidates(self.spec, self.catalog, run.request) for o in run.layout_options(cand)]
            pinned = {(lay.instance_type, lay.count)  # a layout that names its market gets that market, no block
                      for lay in (run.request.layouts or self.spec.candidates.layouts) if lay.market}
            options += (capacity_blocks.block_options(options, quotes, run.exclude, frozenset(pinned))
                        + capacity_reservations.reservation_options(options, quotes, run.exclude))
            warnings = run.warnings()
            ranked, kept = run.rank(run.within_constraints(options))
            self._ranked = (quotes, run, ranked, kept, warnings)
        return self._ranked

    def ranking(self, quotes: Quotes) -> list[Option]:
        """The options in the plan's order (what to ask placement scores for), without the plan's last words."""
        return self._rank(quotes)[2]

    def plan(self, quotes: Quotes) -> Plan:
        _, run, ranked, kept, warnings = self._rank(quotes)
        return _finished(self.spec, self.catalog, quotes, run, ranked, kept, list(warnings))


def _finished(spec: JobSpec, catalog: Catalog, quotes: Quotes, run: "_Planning", ranked: list[Option],
              kept: list[risk.Priced], warnings: list[str]) -> Plan:
    warnings += reasons.low_score_warnings(ranked, quotes)
    if (held := over_quota_warning(ranked, catalog, quotes, run.request.objective)) is not None:
        warnings.append(held)
    if not ranked:
        warnings.append("no layout is left: see the excluded layouts (--show-excluded) for why")
        if run.closest_miss is not None:
            warnings.append(reasons.closest_words(run.closest_miss, spec.constraints.deadline_hours))
    elif (line := risk.sensitivity(kept, run.request.objective)) is not None:
        warnings.append(line)
    if run.model_caveat and ranked:
        warnings[warnings.index(run.model_caveat)] += bench_choice.measure_words(
            run.request.spec_path or spec.name, ranked)
    made = Plan(spec=run.request.spec_path or spec.name, spec_name=spec.name, source=quotes.source,
                catalog_date=catalog.date, objective=run.request.objective, options=tuple(ranked),
                excluded=tuple(run.excluded), warnings=tuple(warnings))
    # the plan says when its throughput cannot tell the choice, and what settling it costs
    unsure = bench_choice.unsure_line(made, lambda o: _device_key(catalog, o.instance_type))
    return made if unsure is None else made.model_copy(update={"warnings": (*made.warnings, unsure)})


def _device_key(catalog: Catalog, instance_type: str) -> str:
    inst = catalog.instance(instance_type)
    return inst.accelerator.key if inst is not None else instance_type


def _same_but_scores(before: Quotes, now: Quotes) -> bool:
    """Whether `now` is `before` with placement scores added (aws/placement.py: with_fixed_scores): every other
    field the very same value."""
    return all(getattr(before, f.name) is getattr(now, f.name) for f in dataclasses.fields(Quotes)
               if f.name not in ("placement_scores", "score_configs", "warnings", "capacity_blocks",
                                 "training_plans", "capacity_reservations"))
