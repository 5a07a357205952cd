"""The I/O shell around the pure planner: load the spec, gather quotes (live or offline), measured
throughput from the job store, and return the plan. The CLI calls this and renders the result."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from trainctl.catalog import load_catalog
from trainctl.errors import UsageError
from trainctl.planner import OBJECTIVES, Plan, PlanRequest, Planner, candidates
from trainctl.planner.quotes import Quotes
from trainctl.perf.stack_inference import StackInference, infer_stack
from trainctl.spec import JobSpec, Layout, load_spec
from trainctl.spec.flexible import is_flexible, members
from trainctl.state.job_store import JobStore


@dataclass
class PlanInputs:
    spec_path: str
    objective: str = "cost"
    layouts: tuple[str, ...] = ()
    platform: str | None = None
    offline: bool = False
    window_hours: float = 168.0
    refresh: bool = False          # ask AWS again instead of taking a cached answer


def parse_layouts(texts: tuple[str, ...] | list[str], known: set[str]) -> tuple[Layout, ...]:
    out = []
    for text in texts:
        try:
            lay = Layout.parse(text)
        except ValueError as e:
            raise UsageError(f"--layout: {e}") from None
        if is_flexible(lay.instance_type):
            try:
                members(load_catalog(), lay.instance_type)
            except ValueError as e:
                raise UsageError(f"--layout {text}: {e}") from None
            out.append(lay)
            continue
        if lay.instance_type not in known:
            from trainctl.spec.loader import did_you_mean

            hint = did_you_mean(lay.instance_type, sorted(known))
            raise UsageError(f"--layout {text}: unknown instance type {lay.instance_type!r}; {hint}`trainctl catalog` "
                             "lists the known types")
        out.append(lay)
    return tuple(out)


@dataclass(frozen=True)
class Planned:
    """A plan with what it was planned from: the quotes and the request, for a plan of one of its layouts
    (`replan`) that asks AWS nothing again."""

    spec: JobSpec
    plan: Plan
    quotes: Quotes
    request: PlanRequest


def make_plan(inputs: PlanInputs, store: JobStore | None = None) -> tuple[JobSpec, Plan]:
    """The spec and its plan; `store` (if any) gives the throughput measured by earlier jobs of this endpoint."""
    planned = plan_from_aws(inputs, store)
    return planned.spec, planned.plan


def plan_from_aws(inputs: PlanInputs, store: JobStore | None = None) -> Planned:
    """make_plan, keeping the quotes and the request it planned from."""
    catalog = load_catalog()
    spec = only_region(load_spec(inputs.spec_path, catalog=catalog))
    if inputs.objective not in OBJECTIVES:
        raise UsageError(f"--objective {inputs.objective!r}: use {', '.join(OBJECTIVES[:-1])} or {OBJECTIVES[-1]}")
    from trainctl.backends import check_platform

    check_platform(inputs.platform)
    request = PlanRequest(objective=inputs.objective,
                          platforms=(inputs.platform,) if inputs.platform else None,
                          layouts=parse_layouts(inputs.layouts, set(catalog.instances)),
                          spec_path=inputs.spec_path, code=read_code(spec, inputs.spec_path))
    quotes = gather_quotes(spec, catalog, request, inputs)
    request = with_data_facts(spec, request, quotes)
    notes = account_measurements(store, quotes)
    result, quotes = _plan_scored(spec, request, measured_rates(store, spec), quotes, inputs.refresh)
    return Planned(spec, result.model_copy(update={"warnings": (*result.warnings, *notes)}) if notes else result,
                   quotes, request)


def _plan_scored(spec: JobSpec, request: PlanRequest, measured: dict, quotes: Quotes,
                 refresh: bool = False) -> tuple[Plan, Quotes]:
    """The plan, and its quotes with the best fixed Spot layouts' placement scores (live), each asked for its
    exact configuration: the ranking that names them is the plan's own when no score is asked, and the layouts'
    throughputs are worked out once either way (planner.Planner)."""
    planner = Planner(spec, load_catalog(), request, measured)
    if quotes.source == "live":
        from trainctl.aws.placement import with_fixed_scores

        quotes = with_fixed_scores(quotes, planner.ranking(quotes), refresh)
        from trainctl.aws.capacity_blocks import with_block_offers

        quotes = with_block_offers(quotes, planner.ranking(quotes), spec.constraints.deadline_hours, refresh)
        from trainctl.aws.training_plans import with_training_plan_offers

        quotes = with_training_plan_offers(quotes, planner.ranking(quotes), spec.constraints.deadline_hours, refresh)
        from trainctl.aws.capacity_reservations import with_held_reservations

        quotes = with_held_reservations(quotes, planner.ranking(quotes))
    return planner.plan(quotes), quotes


def replan(planned: Planned, spec_path: str, platform: str, store: JobStore | None = None) -> tuple[JobSpec, Plan]:
    """The plan of a spec made of one of `planned`'s layouts (a bench job's spec: usecases/bench/spec.py), on
    `platform`, from the quotes and the data facts `planned` was made from: only the layout's own placement
    score is asked, if the first plan did not ask it. The measured throughput is the store's now."""
    spec = only_region(load_spec(spec_path, catalog=load_catalog()))
    request = PlanRequest(platforms=(platform,), spec_path=spec_path, data_facts=planned.request.data_facts,
                          extra_warnings=planned.request.extra_warnings)
    return spec, _plan_scored(spec, request, measured_rates(store, spec), planned.quotes)[0]


def pinned(planned: Planned, spec_path: str, option) -> tuple[JobSpec, Plan]:
    """A spec made of one of `planned`'s layouts (a bench job's spec: usecases/bench/spec.py) with the option the
    plan ranked for it, and no planning run: a launch's checks read where and what it launches (type, count,
    market, region, zone, disk, strategy), which the option says as `replan` would. Its hours and dollars are the
    first spec's workload: a launch that records them prices the spec's own (`replan`)."""
    spec = only_region(load_spec(spec_path, catalog=load_catalog()))
    return spec, planned.plan.model_copy(update={"options": (option,)})


def plan_again(planned: Planned, store: JobStore | None) -> Plan:
    """`planned`'s spec planned again from its quotes with the throughput the store holds now (after a bench
    measured some): AWS is asked only the placement scores of layouts that became the best."""
    return _plan_scored(planned.spec, planned.request, measured_rates(store, planned.spec), planned.quotes)[0]


def measured_rates(store: JobStore | None, spec: JobSpec) -> dict:
    """The throughput earlier jobs of this endpoint measured for the spec's model and batch."""
    measured = store.measured_rates(spec.model.name, spec.workload.batch_size_per_accelerator) if store else {}
    if measured:  # a bench's measurement says so, with its conditions (state/bench_conditions.py)
        from trainctl.state.bench_conditions import with_bench_origin

        measured = with_bench_origin(store, measured)
    return measured


MAX_CODE_FILES = 200             # Python files read for `stack: auto`; a vendored library is not the script
MAX_CODE_BYTES = 1024 * 1024     # per file
SKIP_DIRS = {"site-packages", "node_modules", "__pycache__", "venv", ".venv", "build", "dist"}


def read_code(spec: JobSpec, spec_path: str) -> StackInference | None:
    """The stack a user's script shows (`model.stack: auto`), read from the Python files under source_dir (relative
    to the spec), the script first; None where the spec or a bundled entrypoint already says it."""
    ep = spec.entrypoint
    if spec.model.stack != "auto" or ep.bundled or ep.source_dir is None:
        return None
    root = (Path(spec_path).expanduser().parent / Path(ep.source_dir).expanduser())
    paths = [root / ep.script] if ep.script else []
    if root.is_dir():
        paths += sorted(p for p in root.rglob("*.py")
                        if not any(d in SKIP_DIRS or d.startswith(".") for d in p.relative_to(root).parts[:-1]))
    texts: dict[str, str] = {}
    for path in paths:
        if len(texts) >= MAX_CODE_FILES:
            break
        try:
            if path.is_file() and path.stat().st_size <= MAX_CODE_BYTES:
                texts.setdefault(str(path.relative_to(root)), path.read_text(errors="replace"))
        except (OSError, ValueError):
            continue   # unreadable: the stack is judged from what could be read
    return infer_stack(texts)


def account_measurements(store, quotes: Quotes) -> list[str]:
    """A live plan reads the account's measurements, not only this machine's, into the store (its warnings)."""
    notes: list[str] = []
    if store is not None and quotes.source == "live":
        from trainctl.state.sync import sync_measurements

        for region in quotes.regions:
            notes += sync_measurements(store, region)
    return notes


def with_data_facts(spec: JobSpec, request: PlanRequest, quotes: Quotes) -> PlanRequest:
    """Live plans measure the spec's S3 channels (size, objects, the bucket's Region); offline the sizes given in
    the spec are all the plan has, and it says so for the channels without one."""
    if not spec.data:
        return request
    if quotes.source != "live":
        missing = [n for n, ch in spec.data.items() if getattr(ch, "uri", None) and not ch.size_gb]
        note = (f"offline: data channel{'s' if len(missing) > 1 else ''} {', '.join(missing)} not measured and not "
                "priced; give data.NAME.size_gb, or plan with credentials" if missing else
                "offline: the data buckets' Regions are not known; cross-Region transfer is not priced")
        return replace(request, extra_warnings=request.extra_warnings + (note,))
    from trainctl.aws import clients as aws
    from trainctl.aws.data_size import measure_channels

    facts, warnings = measure_channels(spec, aws.default_region())
    return replace(request, data_facts=facts, extra_warnings=request.extra_warnings + tuple(warnings))


def only_region(spec: JobSpec) -> JobSpec:
    """The spec planned in the global `--region` alone when one was given (as in the AWS CLI, the flag names the
    region to work in): the plan, the launch and `doctor` then agree on it."""
    from trainctl.aws import clients as aws

    region = aws.SETTINGS.region
    if region is None or list(spec.candidates.regions) == [region]:
        return spec
    return spec.model_copy(update={"candidates": spec.candidates.model_copy(update={"regions": [region]})})


def gather_quotes(spec: JobSpec, catalog, request: PlanRequest, inputs: PlanInputs) -> Quotes:
    regions = tuple(spec.candidates.regions)
    dated = catalog.provenance()
    if inputs.offline:
        return Quotes.offline(regions, (f"--offline: {dated}",))
    from trainctl.aws import clients as aws

    if not aws.has_credentials():
        return Quotes.offline(regions, (f"no AWS credentials found: {dated}; configure credentials (or use "
                                        "`trainctl --sandbox`) for live prices, placement scores and quotas",))
    from trainctl.aws.market import DiskCache, MarketRequest, caller_account, fetch_quotes

    try:
        account = caller_account()
    except Exception as e:  # noqa: BLE001 - an endpoint that does not answer plans from the catalog, and says so
        where = aws.endpoint_url() or "AWS"
        return Quotes.offline(regions, (f"{where} did not answer GetCallerIdentity ({aws.error_summary(e)}): "
                                        f"{dated}",))

    cands = candidates(spec, catalog, request)
    platforms = request.platforms or tuple(spec.candidates.platforms)
    spot_counts: dict[str, set[int]] = {}
    for c in cands:
        if "spot" in c.markets and not c.members:   # a flexible layout is scored for its own set (below)
            spot_counts.setdefault(c.instance.name, set()).add(c.count)
    markets = tuple(sorted({m for c in cands for m in c.markets}))
    flexible: dict[tuple[str, ...], set[int]] = {}
    for c in cands:
        if c.members and "spot" in c.markets:
            flexible.setdefault(tuple(sorted(m.name for m in c.members)), set()).add(c.count)
    types = {c.instance.name for c in cands} | {m.name for c in cands for m in c.members}
    req = MarketRequest(regions=regions, instance_types=tuple(sorted(types)),
                        spot_counts={t: tuple(sorted(v)) for t, v in spot_counts.items()},
                        platforms=platforms, markets=markets, window_hours=inputs.window_hours,
                        flexible_sets={k: tuple(sorted(v)) for k, v in flexible.items()})
    return fetch_quotes(catalog, req, DiskCache(account, refresh=inputs.refresh))
