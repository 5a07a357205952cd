"""`trainctl bench SPEC`: measure the user's own model on the layouts where a measurement could change the
choice, for a bounded number of dollars, before the big run.

1. Choose (planner/bench_choice.py): plan, keep the layouts whose throughput band could change the top
   choice (or `--top N`, `--layout`), refuse in one line when their dollar bound is over the cap.
2. Run, one layout after the other: a bench spec (spec.py: the user's spec, its workload cut to
   warm-up + measured steps on this layout, pinned to the option's platform, market and region) goes through
   the normal launch path (its checks, and all of a dry run, take the option the plan ranked: usecases/plan.py:
   pinned, no planning run; a job that runs is priced for its short workload from the first plan's quotes:
   replan; AWS is not asked for them again) with the hard maximum runtime (`max_runtime_hours`: SageMaker's
   StoppingCondition.MaxRuntimeInSeconds, the EC2 node agent's deadline); the job's metric lines are read
   the way `watch` reads them, the steps up to the warm-up are not counted; a job still running once it
   logged the measured steps (a script that ignores the shortened workload) is stopped; then `down`.
   A Spot interruption is data (the row says so), not an error.
3. Record (record.py): the median measured rate in the store's measured throughput (per endpoint, as
   every measurement) and the conditions as the job's `bench` event; the next plan uses it.
   The plan after the bench is the first plan's quotes priced again with the measured throughput (plan_again).
Ctrl-C, SIGTERM or SIGHUP (a closed terminal, a cancelled CI job): every bench job launched so far is taken down
(stopped, its resources removed) before the interrupt goes on.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from trainctl.errors import TrainctlError
from trainctl.planner.bench_choice import DEFAULT_MAX_MINUTES, BenchChoice, Candidate, choose
from trainctl.state.job_store import JobStore

DEFAULT_STEPS = 40          # measured steps per layout
DEFAULT_WARMUP_STEPS = 20   # not counted: start-up, first compilation, data loader warm-up
EXIT_REFUSED = 2


@dataclass
class BenchInputs:
    spec_path: str
    objective: str = "cost"
    platform: str | None = None
    offline: bool = False
    top: int | None = None
    layouts: tuple[str, ...] = ()
    max_usd: float | None = None
    max_minutes: float = DEFAULT_MAX_MINUTES
    steps: int = DEFAULT_STEPS
    warmup_steps: int = DEFAULT_WARMUP_STEPS
    dry_run: bool = False
    interval: float = 2.0
    yes: bool = False           # do not ask before spending (the bench's dollar bound)


def plan_choice(inputs: BenchInputs, store: JobStore):
    """(the plan as it stands, the plan the choice was made from (usecases/plan.py: Planned), the bench's choice)."""
    from trainctl.usecases.plan import PlanInputs, plan_from_aws

    planned = plan_from_aws(PlanInputs(spec_path=inputs.spec_path, objective=inputs.objective,
                                       platform=inputs.platform, offline=inputs.offline), store)
    source = planned
    if inputs.layouts:  # the named layouts may be outside the spec's candidates: plan them as named
        source = plan_from_aws(PlanInputs(spec_path=inputs.spec_path, objective=inputs.objective,
                                          layouts=inputs.layouts, platform=inputs.platform, offline=inputs.offline),
                               store)
    choice = choose(source.plan, max_minutes=inputs.max_minutes, top=inputs.top, layouts=inputs.layouts,
                    max_usd=inputs.max_usd, transport_of=transport)
    return planned, source, choice


def transport(option) -> str:
    """The transport an option's nodes talk over: EFA where its platform turns EFA on for the type, else TCP."""
    from trainctl.catalog import load_catalog
    from trainctl.perf.network import efa_in_use

    inst = load_catalog().instances.get(option.instance_type)
    return "efa" if inst is not None and efa_in_use(inst, option.platform) else "tcp"


def _candidate_row(c: Candidate, inputs: BenchInputs) -> dict:
    o = c.option
    return {"layout": c.layout, "platform": o.platform, "transport": transport(o) if o.count > 1 else "none", "region": o.region, "market": o.market,
            "predicted_samples_per_s": round(o.throughput_samples_per_s, 2),
            "band": [round(x, 2) for x in o.throughput_band] if o.throughput_band else None,
            "throughput_source": o.throughput_source, "expected_cost_usd": round(o.expected_cost_usd, 2),
            "why": c.reason, "bound_usd": round(c.bound_usd, 4), "max_minutes": inputs.max_minutes,
            "steps": inputs.steps, "warmup_steps": inputs.warmup_steps}


def choice_document(plan, choice: BenchChoice, inputs: BenchInputs) -> dict:
    return {"spec": inputs.spec_path, "objective": plan.objective,
            "top_before": plan.options[0].describe() if plan.options else None,
            "cap_usd": round(choice.cap_usd, 4), "cap_rule": choice.cap_rule, "bound_usd": round(choice.bound_usd, 4),
            "layouts": [_candidate_row(c, inputs) for c in choice.chosen],
            "not_measured": [{"layout": c.layout, "why": c.reason} for c in choice.skipped],
            "notes": list(choice.notes)}


def bench(inputs: BenchInputs, store: JobStore, say: Callable[[str], None],
          confirm: Callable[[str], bool] = lambda question: True) -> dict:
    """The bench document: the --dry-run preview, or every layout's measurement and the plan after it. The launch's
    checks run for every chosen layout first (the dry run too), then `confirm` is asked for the dollar bound
    (unless --yes), and only then is anything launched."""
    planned, source, choice = plan_choice(inputs, store)
    plan = planned.plan
    doc = choice_document(plan, choice, inputs)
    if choice.refusal:
        raise TrainctlError(choice.refusal, exit_code=EXIT_REFUSED)
    if not choice.chosen:
        doc.update(dry_run=inputs.dry_run, measured=[], top_after=doc["top_before"], changed=False)
        say("nothing worth measuring: no layout's throughput band can change the top choice (--top N or "
            "--layout measure anyway)")
        return doc
    from trainctl.usecases.bench.run import BenchRun

    runner = BenchRun(inputs, planned.spec, store, say, source)
    refused = runner.refusals(choice.chosen)
    if refused:
        raise TrainctlError("not benched, nothing launched: " + "; also ".join(
            f"{', '.join(layouts)}: {why}" for why, layouts in refused.items()), exit_code=EXIT_REFUSED)
    if inputs.dry_run:
        doc["dry_run"] = True
        return doc
    n = len(choice.chosen)
    if not inputs.yes and not confirm(f"Bench {n} layout{'s' if n != 1 else ''} "
                                      f"({', '.join(c.layout for c in choice.chosen)}) for up to "
                                      f"${choice.bound_usd:,.2f}, each job stopped at {inputs.max_minutes:g} min "
                                      "at the latest?"):
        raise TrainctlError("not benched: nothing launched", exit_code=1)
    from trainctl.usecases.bench.run import Hangup, ending_signals_as_ctrl_c

    try:
        with ending_signals_as_ctrl_c():  # a closed terminal or `kill` takes the jobs down as Ctrl-C does
            for row, c in zip(doc["layouts"], choice.chosen):
                try:
                    row.update(runner.measure(c))
                except TrainctlError as e:  # no capacity, a refused launch: that layout's row says so, the rest run
                    row.update(status="not measured", measured_samples_per_s=None, spent_usd=None, note=str(e),
                               **({"job_id": e.job_id} if getattr(e, "job_id", None) else {}))
                    say(f"bench {c.layout}: not measured (the summary says why)")  # the message once, there
    except KeyboardInterrupt as e:
        runner.take_down_all(f"interrupted ({e.args[0]})" if isinstance(e, Hangup) and e.args else "interrupted")
        raise
    after = _plan_after(planned, store)
    # a job that ran but whose follow gave up has dollars nobody counted: the total is then not known (at least the
    # rest), never reported as if it were $0
    unknown = [r["job_id"] for r in doc["layouts"] if r.get("job_id") and r.get("spent_usd") is None]
    known = round(sum(r.get("spent_usd") or 0.0 for r in doc["layouts"]), 4)
    doc.update(dry_run=False, spent_usd=None if unknown else known, spent_at_least_usd=known,
               spent_unknown_jobs=unknown, top_after=after.options[0].describe() if after.options else None)
    doc["changed"] = _key(plan) != _key(after)
    return doc


def _plan_after(planned, store: JobStore):
    """The plan with what the bench measured: the first plan's quotes, priced again with the store's
    throughput now (the measurements are what changed)."""
    from trainctl.usecases.plan import plan_again

    return plan_again(planned, store)


def _key(plan) -> tuple | None:
    if not plan.options:
        return None
    o = plan.options[0]
    return (o.platform, o.type_label, o.count, o.market, o.region)
