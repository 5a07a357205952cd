"""Pure planning: valid layouts, expected time and cost with interruptions, capacity odds, ranking.

`plan(spec, catalog, quotes, ...)` takes data and returns a `Plan`; no boto3, no clock, no printing.
The numbers' meaning and the assumptions behind them are written out in docs/cost-model.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from trainctl import perf
from trainctl.perf import estimator as perf_layout
from trainctl.perf.estimator import MeasuredRate
from trainctl.perf.stack_inference import StackInference
from trainctl.planner.spot import risk
from trainctl.catalog import Catalog, InstanceType, images, load_calibration, load_calibration_residuals
from trainctl.catalog.platforms import facts as platform_facts
from trainctl.planner.flexible import flexible_options
from trainctl.planner.memory_admission import memory_fits
from trainctl.planner.data_terms import ChannelFacts, layout_data
from trainctl.planner.disk import has_fsx, keep_of, plan_disk
from trainctl.planner.pricing import input_limit, objective_value, price_option
from trainctl.plans import Excluded, Option
from trainctl.planner import reasons
from trainctl.planner.quotes import Quotes
from trainctl.spec import JobSpec, Layout
from trainctl.spec.flexible import family_groups, is_flexible, label
from trainctl.spec.flexible import members as flexible_members

# --objective values: rank by expected cost, by the 90th percentile of simulated cost, or by wall hours.
OBJECTIVES = ("cost", "p90-cost", "time")


@dataclass
class _Candidate:
    instance: InstanceType
    count: int
    markets: tuple[str, ...]
    members: tuple[InstanceType, ...] = ()   # a flexible layout's types (planner/flexible.py); () when fixed
    group: str = ""                          # its name: g5:1xA10G, or the types joined by '|'


@dataclass
class PlanRequest:
    """What to plan beyond the spec: the CLI's flags."""

    objective: str = "cost"                       # one of OBJECTIVES
    platforms: tuple[str, ...] | None = None      # None: the spec's
    layouts: tuple[Layout, ...] = ()              # non-empty: exactly these layouts
    extra_warnings: tuple[str, ...] = field(default_factory=tuple)
    spec_path: str = ""                           # as the user gave it; the plan document names it
    data_facts: dict[str, ChannelFacts] = field(default_factory=dict)   # channel -> measured size, objects, Region
    code: StackInference | None = None            # the stack read from the user's script (usecases/plan.py)


# ----------------------------------------------------------------------------- helpers
def stack_of(spec: JobSpec, code: StackInference | None) -> tuple[str, str]:
    """(stack, where it came from): the spec's model.stack, the bundled entrypoint's, or the user's code's."""
    if spec.model.stack != "auto":
        return spec.model.stack, "model.stack"
    if spec.entrypoint.bundled:
        return spec.stack, f"the bundled {spec.entrypoint.bundled} entrypoint's"
    if code is None:
        return "auto", "model.stack auto, the script's code not read"
    return code.stack, code.words()


def stack_read(spec: JobSpec, code: StackInference | None) -> bool:
    """The stack came from the user's code (model.stack auto, a script of their own whose code showed one)."""
    return spec.model.stack == "auto" and not spec.entrypoint.bundled and code is not None and code.stack != "auto"


def model_shape(spec: JobSpec, code: StackInference | None = None) -> perf.ModelShape:
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
                           family=a.family if a else m.family, vocab=a.vocab if a else None,
                           stack=stack_of(spec, code)[0], stack_basis=stack_of(spec, code)[1],
                           stack_read=stack_read(spec, code),
                           tf32=True if spec.entrypoint.bundled else (code.tf32 if code else None),
                           tensor_parallel=m.tensor_parallel)


def candidates(spec: JobSpec, catalog: Catalog, request: PlanRequest) -> list[_Candidate]:
    """Every (instance type, node count, markets) the plan will consider: what market.py must quote."""
    cands = spec.candidates
    layouts = list(request.layouts) or list(cands.layouts)
    out: list[_Candidate] = []
    if layouts:
        for lay in layouts:
            markets = (lay.market,) if lay.market else tuple(cands.markets)
            if is_flexible(lay.instance_type):
                out.append(flexible_candidate(catalog, lay.instance_type, lay.count, markets))
                continue
            inst = catalog.instance(lay.instance_type)
            if inst is not None:
                out.append(_Candidate(inst, lay.count, markets))
        if request.layouts:
            return _merged(out)
    families = cands.families or ([] if cands.layouts else catalog.families)
    for inst in sorted(catalog.instances.values(), key=lambda i: i.name):
        if inst.family not in families:
            continue
        for n in range(cands.nodes.min, cands.nodes.max + 1):
            out.append(_Candidate(inst, n, tuple(cands.markets)))
    flexible = [flexible_candidate(catalog, group, n, tuple(cands.markets))
                for group in flexible_groups(cands, catalog, families)
                for n in range(cands.nodes.min, cands.nodes.max + 1)]
    return _merged(out + flexible)


def _merged(cands: list[_Candidate]) -> list[_Candidate]:
    """One candidate per layout (its type, or a flexible layout's group, and its count): a layout listed in
    candidates.layouts that the families also produce would otherwise be priced, ranked and shown twice. Its
    markets are the union, in first-seen order."""
    by_layout: dict[tuple[str, int], _Candidate] = {}
    for c in cands:
        key = (c.group or c.instance.name, c.count)
        seen = by_layout.get(key)
        if seen is None:
            by_layout[key] = _Candidate(c.instance, c.count, c.markets, c.members, c.group)
        else:
            seen.markets = seen.markets + tuple(m for m in c.markets if m not in seen.markets)
    return list(by_layout.values())


def flexible_groups(cands, catalog: Catalog, families) -> list[str]:
    """The flexible layouts `candidates.flexible` asks for: every family's sizes that share the accelerator
    (true), or the lists given."""
    if cands.flexible is True:
        return family_groups(catalog, families)
    return ["|".join(types) for types in cands.flexible or []]


def flexible_candidate(catalog: Catalog, group: str, count: int, markets: tuple[str, ...]) -> _Candidate:
    members = tuple(catalog.instances[t] for t in flexible_members(catalog, group))
    return _Candidate(members[0], count, markets, members, label(catalog, [m.name for m in members]))


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
                measured: dict[tuple[str, int, str], MeasuredRate], fit: perf.MemoryFit,
                catalog: Catalog) -> perf_layout.Estimate:
    """Samples/s of the layout on this platform (SageMaker turns EFA on for some types only), with its source,
    for the fit's strategy and its micro-batches."""
    batch = spec.workload.batch_size_per_accelerator
    given = spec.throughput.get(inst.name) or spec.throughput.get(inst.accelerator.key)
    job = perf_layout.Job(shape, spec.model.name, fit.micro_batch, spec.workload.total_samples, fit.strategy,
                          given, fit.grad_accum)
    return perf_layout.estimate(job, inst, count, platform, measured.get((spec.model.name, batch, inst.name)),
                                catalog, load_calibration())


class _Planning:
    """One plan in the making: what it was asked, what it left out and why."""

    def __init__(self, spec: JobSpec, catalog: Catalog, quotes: Quotes, request: PlanRequest,
                 measured: dict[tuple[str, int, str], MeasuredRate], throughputs: dict | None = None,
                 layouts: dict | None = None):
        self.spec, self.catalog, self.quotes, self.request, self.measured = spec, catalog, quotes, request, measured
        self.throughputs = {} if throughputs is None else throughputs
        self.layouts = {} if layouts is None else layouts
        self._effects: list | None = None   # what the layout being priced leaves out, to replay on reuse
        self.shape = model_shape(spec, request.code)
        self.platforms = request.platforms or tuple(spec.candidates.platforms)
        self.regions = [r for r in spec.candidates.regions if r in quotes.regions]
        self.excluded: list[Excluded] = []
        self._seen: set[tuple[str, int, str]] = set()
        self.unpriced: dict[tuple[str, str], set[str]] = {}
        self.closest_miss: Option | None = None  # the option nearest the deadline among those that miss it
        # what the throughput model cannot tell of this model: said once, with the price of measuring it
        self.model_caveat = None if spec.throughput else perf_layout.cnn_by_size_words(
            self.shape, load_calibration_residuals())

    def exclude(self, inst_name: str, count: int, reason: str, **where) -> None:
        if self._effects is not None:
            self._effects.append(("exclude", (inst_name, count, reason), where))
        key = (inst_name, count, reason)
        if key not in self._seen:  # one line per layout and reason, not per platform x region x market
            self._seen.add(key)
            self.excluded.append(Excluded(instance_type=inst_name, count=count, reason=reason, **where))

    def warnings(self) -> list[str]:
        out = list(self.quotes.warnings) + list(self.request.extra_warnings)
        if self.shape.layers is None and self.shape.family != "cnn":
            out.append(f"layer count unknown (model given by params and flops_per_sample): a sharded layer is "
                       f"assumed to hold {perf.layer_params(self.shape):,.0f} parameters (twice a typical "
                       "transformer layer of this size); give model.layers/hidden/heads/seq_len or model.config")
        if self.model_caveat:
            out.append(self.model_caveat)
        if self.shape.activation_bytes_per_sample is None:
            out.append("activation memory unknown (no architecture and no model.activation_gib_per_sample): "
                       "memory fit counts weights, gradients and optimizer state only")
        for (platform, region), types in sorted(self.unpriced.items()):
            out.append(f"{region}: no {platform} On-Demand price for {', '.join(sorted(types))} in the catalog "
                       f"{'or the Pricing API' if self.quotes.source == 'live' else '(offline)'}; those "
                       f"{platform} options are left out" + self._why_unpriced(platform, region))
        return out

    def _why_unpriced(self, platform: str, region: str) -> str:
        """The catalog holds an EC2 price wherever AWS's price list offered the type (scripts/catalog_sources): a
        type with no EC2 price in a region was not offered there; SageMaker prices follow the EC2 ones."""
        if platform_facts(platform).price_list != "AmazonEC2" \
                or self.catalog.data_dates.get("ec2_prices_other_regions") is None:
            return ""
        return (f" (AWS's EC2 price list of {self.catalog.data_dates['ec2_prices_other_regions']} does not offer "
                f"them in {region})")

    def fit(self, inst: InstanceType, count: int):
        """(memory fits to choose from, ranks in the layout), or None when the layout is left out (with its
        reason). Several fits when sharding may be full or hybrid: the throughput decides, per platform."""
        shape, spec = self.shape, self.spec
        reason = _entrypoint_mismatch(spec, inst) or _validity(inst, count)
        if reason:
            self.exclude(inst.name, count, reason)
            return None
        if not inst.accelerator.supports(shape.precision):
            self.exclude(inst.name, count, f"{inst.accelerator.key} has no {shape.precision} support; set "
                                           f"model.precision to one of {', '.join(sorted(inst.accelerator.peak_tflops))}"
                                           " to consider it")
            return None
        ranks = perf.ranks(inst, load_calibration())  # GPUs, or NeuronCores: the entrypoint's unit
        n_acc = count * ranks.per_node
        if ranks.per_node % shape.tensor_parallel:
            self.exclude(inst.name, count, f"model.tensor_parallel {shape.tensor_parallel} does not divide the "
                                           f"{ranks.per_node} {ranks.unit}s of one node (a layer is split inside one)")
            return None
        fits, fit = memory_fits(spec, shape, ranks.memory_gib, count, ranks.per_node)
        if fits:
            return fits, n_acc
        unit = "NeuronCore" if ranks.unit == "NeuronCore" else inst.accelerator.key
        need = (f"with full sharding (fsdp) it needs at least {fit.min_accelerators_sharded} "
                f"{'NeuronCores' if ranks.unit == 'NeuronCore' else 'accelerators'}"
                if fit.min_accelerators_sharded else
                "even fully sharded it does not fit: the batch's activations alone exceed memory; lower "
                "workload.batch_size_per_accelerator or set model.activation_checkpointing"
                if shape.activation_bytes_per_sample is not None else
                "even fully sharded it does not fit: one unsharded layer and the output buffers alone exceed memory "
                "(activations unknown, not counted); give the model's shape (model.layers, hidden, heads, seq_len) "
                "or model.config for its real layer size")
        if spec.entrypoint.bundled in ("ddp", "neuron"):
            need += (f"; the bundled {spec.entrypoint.bundled} entrypoint replicates the model (DDP): shard it "
                     "with 'bundled: lm' or your own script")
        at = f" at micro-batch {fit.micro_batch}" if spec.entrypoint.bundled == "lm" else ""
        self.exclude(inst.name, count, f"out of memory: {fit.total_gib:.1f} GiB per {unit} "
                                       f"({fit.strategy}{at}) > {fit.usable_gib:.1f} GiB usable; {need}")
        return None

    def layout_options(self, cand: _Candidate) -> list[risk.Priced]:
        """The candidate's priced options; those of the planner's last pass when the quotes differ only in
        placement scores that are not this layout's (a live plan's scores re-price only the layouts scored)."""
        key = (cand.instance.name, cand.count, cand.markets, tuple(m.name for m in cand.members))
        scores = self._scores_of(cand)
        last = self.layouts.get(key)
        if last is not None and last[0] == scores:
            for what, args, where in last[2]:  # what it left out, said again in this pass's order
                self.exclude(*args, **where) if what == "exclude" else self.on_demand(*args)
            return list(last[1])
        self._effects = []
        try:
            out = self._layout_options(cand)
            self.layouts[key] = (scores, tuple(out), tuple(self._effects))
        finally:
            self._effects = None
        return out

    def _scores_of(self, cand: _Candidate) -> tuple:
        """The placement scores (and the types each was asked for) that price the candidate: its type's, or
        those of a set of its flexible types, for its node count."""
        names = {m.name for m in cand.members} or {cand.instance.name}
        keys = sorted(k for k in {*self.quotes.placement_scores, *self.quotes.score_configs}
                      if k[2] == cand.count and set(k[1].split("|")) <= names)
        return tuple((k, self.quotes.placement_scores.get(k), self.quotes.score_configs.get(k)) for k in keys)

    def _layout_options(self, cand: _Candidate) -> list[risk.Priced]:
        if cand.members:
            return flexible_options(self, cand, _throughput)
        inst, count = cand.instance, cand.count
        fitted = self.fit(inst, count)
        if fitted is None:
            return []
        fits, n_acc = fitted
        out = []
        for platform in self.platforms:
            if not (own := platform_facts(platform)).offers(inst):
                self.exclude(inst.name, count, f"{own.title} training does not offer this type", platform=platform)
                continue
            if (no_image := images.drives(platform, inst.family, inst.accelerator.key, inst.accelerator.kind)
                    or (has_fsx(self.spec) and images.no_lustre_client(platform, inst.accelerator.kind))):
                self.exclude(inst.name, count, no_image, platform=platform)  # catalog/images.py: what each image drives
                continue
            # Full or hybrid sharding: the faster on this platform's network (full on a tie: less memory).
            fit, tp = max(((f, self.throughput(inst, count, platform, f)) for f in fits),
                          key=lambda pair: (pair[1].samples_per_s, pair[0].strategy != "hsdp"))
            cpu_feed = input_limit(self.spec, inst, count, tp.samples_per_s)
            for region in self.regions:
                price = self.on_demand(platform, region, inst)
                feed, times, data = layout_data(self, inst, count, platform, region, fit, tp, cpu_feed, n_acc)
                room = plan_disk(platform, inst.name, self.shape, data.node_copy_bytes if data else 0.0,
                                 keep_of(self.spec), count, fit.strategy)
                if room.refusal:  # the copy, checkpoints and model cannot fit a node's disk (planner/disk.py)
                    self.exclude(inst.name, count, room.refusal, platform=platform, region=region)
                    continue
                for market in cand.markets if price else ():
                    opt = price_option(self.catalog, self.quotes, inst, count, platform, region, market, *price,
                                       times, fit, tp, feed, n_acc, self.spec.constraints.max_spot_wait_hours,
                                       self.exclude, data=data)
                    if opt is not None:
                        out.append(replace(opt, option=opt.option.model_copy(update={
                            "volume_gb": room.volume_gb, "why": opt.option.why + (room.words,)})))
        return out

    def throughput(self, inst: InstanceType, count: int, platform: str, fit: perf.MemoryFit) -> perf_layout.Estimate:
        """_throughput, worked out once per planner (it depends on no quote)."""
        key = (inst.name, count, platform, fit)
        if key not in self.throughputs:
            self.throughputs[key] = _throughput(self.spec, self.shape, inst, count, platform, self.measured, fit,
                                                self.catalog)
        return self.throughputs[key]

    def on_demand(self, platform: str, region: str, inst: InstanceType) -> tuple[float, str] | None:
        """(On-Demand $/h per node, where it came from), or None (noted as unpriced)."""
        live = self.quotes.on_demand.get((platform, region, inst.name))
        if live is not None:
            return live, "Pricing API"
        cat = self.catalog.on_demand_price(platform, region, inst.name)
        if cat is not None:
            return cat.usd_per_hour, f"catalog {self.catalog.date}: {self.catalog.price_source_words(cat.source)}"
        if self._effects is not None:
            self._effects.append(("unpriced", (platform, region, inst), {}))
        self.unpriced.setdefault((platform, region), set()).add(inst.name)
        return None

    def within_constraints(self, options: list[risk.Priced]) -> list[risk.Priced]:
        cons, kept = self.spec.constraints, []
        for priced in options:
            o = priced.option
            where = {"platform": o.platform, "market": o.market, "region": o.region}
            if cons.deadline_hours is not None and o.wall_hours > cons.deadline_hours:
                miss = self.closest_miss
                if miss is None or (o.wall_hours, o.expected_cost_usd) < (miss.wall_hours, miss.expected_cost_usd):
                    self.closest_miss = o
                self.exclude(o.type_label, o.count, f"misses the deadline: {o.wall_hours:.1f} wall hours "
                                                    f"expected > {cons.deadline_hours:g} h", **where)
            elif cons.budget_usd is not None and o.expected_cost_usd > cons.budget_usd:
                self.exclude(o.type_label, o.count, f"over budget: {_dollars(o.expected_cost_usd)} expected > "
                                                       f"{_dollars(cons.budget_usd)}", **where)
            else:
                kept.append(priced)
        return [risk.Priced(risk.with_spread(p), p.model, p.input_limit_ratio, p.extra_usd) for p in kept]

    def rank(self, kept: list[risk.Priced]) -> tuple[list[Option], list[risk.Priced]]:
        objective = self.request.objective

        def key(p: risk.Priced):
            o = p.option
            # Layouts the account cannot launch (over quota) go after those it can, whatever their price.
            return (o.quota_ok is False, *objective_value(o, objective), o.instance_type, o.count, o.platform,
                    o.region)

        kept = sorted(kept, key=key)
        ordered = [p.option for p in kept]
        front = reasons.pareto_front(ordered)
        ranked = [o.model_copy(update={"rank": i + 1, "pareto": i in front,
                                       "why": reasons.ranking_words(o, i, ordered, objective) + o.why})
                  for i, o in enumerate(ordered)]
        return ranked, kept


def _dollars(x: float) -> str:
    """Whole dollars where cents do not matter; cents below $100, so that a small budget never reads "$0 > $0";
    two figures below a cent (a $0.004 budget is not "$0.00")."""
    return f"${x:,.0f}" if x >= 100 else f"${x:,.2f}" if x >= 0.01 or x == 0 else f"${x:.2g}"
