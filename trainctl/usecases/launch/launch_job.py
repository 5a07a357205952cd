"""Launch orchestration, the same for every platform: choose an option (re-plan, a saved plan, or an
exact layout), prepare (reads only), show, confirm, submit exactly what was shown, fail over to the
next-ranked option when capacity is refused, and record every attempt in the job store. Works on the typed
plan (`trainctl.plans`) throughout: no stage reads an option as a dict."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from trainctl.backends.calls import SubmitTrace
from trainctl.state import sync as shared_jobs
from trainctl.usecases.launch import capacity_block, elastic, resume
from trainctl.usecases.launch.results import Attempt, LaunchResult, account as _account, new_job_id
from trainctl.usecases.launch.outcomes import after_submit, interrupted, submit_failed
from trainctl.usecases.jobs.notify import remember as remember_notify
from trainctl.errors import TrainctlError, UsageError
from trainctl.plans import Option, Plan, load_saved_plan
from trainctl.state.job_store import JobStore

CAPACITY_WORDS = ("CapacityError", "InsufficientInstanceCapacity", "Insufficient capacity", "InsufficientCapacity")
STARTED_STATUSES = ("Downloading", "Training", "Uploading", "Completed")
EXIT_NO_CAPACITY = 4


@dataclass
class LaunchArgs:
    spec_path: str
    option_rank: int | None = None
    plan_path: str | None = None
    layouts: tuple[str, ...] = ()
    platform: str | None = None
    objective: str = "cost"
    offline: bool = False
    dry_run: bool = False
    yes: bool = False
    failover: bool = False
    allow_duplicate: bool = False     # launch even while an earlier job of the same spec runs
    buy_capacity_block: bool = False  # buy the chosen Capacity Block offer (its own flag: never implied by yes)
    resume_from: str | None = None    # an earlier job whose checkpoints the new job starts from (resume.py)
    poll_seconds: float = 10.0        # how often a --failover launch checks that the job got capacity
    # the platform flags given (backends/options.py declares them); each backend resolves its own, typed
    platform_options: dict = field(default_factory=dict)
    planned: Any = None               # (spec, plan) already planned for spec_path (bench: usecases/plan.py: replan)


def choose_options(args: LaunchArgs, store: JobStore | None) -> tuple[Any, Plan, list[Option], int]:
    """(spec, plan, its options on the asked platform in rank order, index of the chosen one). A re-plan uses
    the store's measured throughput; a saved plan is validated by the plan model."""
    from trainctl.backends import BACKENDS
    from trainctl.spec import load_spec

    if args.plan_path and args.layouts:
        raise UsageError("give --plan or --layout, not both")
    if args.planned is not None:
        spec, plan = args.planned
    elif args.plan_path:
        plan = load_saved_plan(args.plan_path)
        _check_known_types(plan, args.plan_path)
        spec = load_spec(args.spec_path)
    else:
        from trainctl.usecases.plan import PlanInputs, make_plan

        spec, plan = make_plan(PlanInputs(spec_path=args.spec_path, objective=args.objective, layouts=args.layouts,
                                          platform=args.platform, offline=args.offline), store)
    options = [o for o in plan.options if args.platform in (None, o.platform)]
    if not options:
        left = [e for e in plan.excluded if args.platform in (None, e.platform)]  # the first reason, in the line
        why = f": {left[0].count}x {left[0].instance_type}{f' on {left[0].platform}' if left[0].platform else ''} " \
              f"{left[0].reason}" if left else ""
        raise TrainctlError(f"the plan has no option to launch{why} (`trainctl plan SPEC --show-excluded` says why)",
                            exit_code=3)
    if args.option_rank is not None:
        idx = next((i for i, o in enumerate(options) if o.rank == args.option_rank), None)
        if idx is None:
            raise UsageError(f"--option {args.option_rank}: the plan's ranks are "
                             f"{', '.join(str(o.rank) for o in options[:20])}")
    else:
        idx = next((i for i, o in enumerate(options) if o.platform in BACKENDS), None)
        if idx is None:
            raise UsageError(f"no option of the plan is on a platform trainctl can launch yet "
                             f"({', '.join(sorted(BACKENDS))}); try --platform {next(iter(BACKENDS))}")
    return spec, plan, options, idx


def _check_known_types(plan: Plan, path: str) -> None:
    """A saved plan may come from another trainctl or a hand edit: every type must be one the catalog knows."""
    from trainctl.catalog import load_catalog

    known = load_catalog().instances
    for i, o in enumerate(plan.options):
        unknown = [t for t in (o.instance_type, *o.instance_types) if t not in known]
        if unknown:
            field = "instance_type" if unknown[0] == o.instance_type else "instance_types"
            raise UsageError(f"--plan {path}: options.{i}.{field} {unknown[0][:40]!r} is not in the "
                             "catalog (`trainctl catalog` lists the known types); save the plan again with "
                             "`trainctl plan SPEC -o json > plan.json`")


def capacity_problem(view) -> str | None:
    """Why the job could not get capacity, or None (it got it, or failed for another reason)."""
    reason = view.failure_reason or ""
    if view.status == "Failed" and any(w in reason for w in CAPACITY_WORDS):
        return reason.splitlines()[0]
    if view.status == "Stopped" and view.secondary_status == "MaxWaitTimeExceeded" and not _started(view):
        return "Spot capacity: MaxWaitTimeExceeded before training started"
    return None


def _started(view) -> bool:
    return any(t.status in STARTED_STATUSES for t in view.transitions)


def wait_for_capacity(backend, job_id: str, region: str, poll_seconds: float,
                      say: Callable[[str], None]) -> str | None:
    """Poll until the job has its instances (None) or was refused capacity (the reason)."""
    delay = poll_seconds
    last = None
    while True:
        view = backend.describe(job_id, region)
        if view.secondary_status != last:
            last = view.secondary_status
            msg = view.transitions[-1].message if view.transitions else ""
            say(f"{job_id}: {view.status}/{view.secondary_status}" + (f" - {msg}" if msg else ""))
        problem = capacity_problem(view)
        if problem:
            return problem
        if _started(view):
            return None
        if view.finished:
            raise TrainctlError(f"{job_id} ended {view.status} before training started: "
                                f"{view.failure_reason or view.secondary_status}")
        time.sleep(delay)
        delay = min(delay * 1.5, max(poll_seconds, 60.0))


@dataclass
class _Run:
    """What every attempt of one launch shares."""

    args: LaunchArgs
    spec: Any
    plan: Plan
    store: JobStore
    say: Callable[[str], None]
    account: str | None = None
    lock: Any = None           # the job store's lock of this spec's launches, held until the launch ends
    marker: Any = None         # the spec's launch marker on AWS (duplicates.LaunchMarker) once claimed
    job_id: str | None = None  # chosen before the calls: a Capacity Block's purchase is tagged with it
    purchase: dict | None = None  # --dry-run: the PurchaseCapacityBlock request the launch would make first
    resume: dict | None = None    # --resume-from: the checkpoints to copy in (resume.checked)


def launch(args: LaunchArgs, store: JobStore, say: Callable[[str], None], show: Callable[[Option, Any], None],
           confirm: Callable[[str], bool]) -> dict | LaunchResult:
    """The --dry-run document (dry run), or the LaunchResult of a submitted launch."""
    from trainctl.backends import BACKENDS, backend_class

    spec, plan, options, idx = choose_options(args, store)
    run = _Run(args, spec, plan, store, say)
    capacity_block.not_a_block(args, options[idx])
    run.resume = resume.checked(store, args.resume_from, spec) if args.resume_from else None
    if options[idx].market == capacity_block.MARKET:  # bought on its own flag only, never twice (capacity_block.py)
        if not isinstance(chosen := capacity_block.on_block(run, options[idx], options, confirm), Option):
            return chosen  # bought, and waiting for the block's start
        options[idx] = chosen
    sequence = [options[idx]]
    if args.failover:
        sequence += [o for o in capacity_block.without_blocks(options[idx + 1:]) if o.platform in BACKENDS]
    # what each option launches as (Backend.launch_units: a flexible option is one job per type on a platform
    # that takes one type per job)
    sequence = [one for o in sequence for one in backend_class(o.platform).launch_units(o, args.failover, say)]
    elastic.check(spec, sequence, say)  # min_nodes against each layout; SageMaker's fixed size said once
    try:
        return _launch_sequence(run, sequence, confirm, show)
    finally:
        _release(run)


def _launch_sequence(run: _Run, sequence: list[Option], confirm: Callable[[str], bool],
                     show: Callable[[Option, Any], None]) -> dict | LaunchResult:
    from trainctl.backends import get_backend
    from trainctl.backends.base import LaunchSettings

    args, store, say = run.args, run.store, run.say
    base_id = run.job_id or new_job_id(run.spec.name)
    attempts: list[Attempt] = []
    for n, option in enumerate(sequence):
        job_id = base_id if n == 0 else f"{base_id}-f{n}"
        backend = get_backend(option.platform)
        settings = LaunchSettings(job_id=job_id, spec_path=args.spec_path,
                                  options=backend.options(args.platform_options, f"option {option.rank}"))
        request = backend.prepare(option, run.spec, settings)
        if args.dry_run:
            doc = _dry_run_document(backend, request, run.spec, option, settings.options)
            return {**doc, "capacity_block_purchase": run.purchase} if run.purchase else doc
        show(option, request)
        if n == 0:
            _confirm(run, confirm, f"Launch {job_id} ({len(request.calls)} AWS calls)?")
        attempt, problem = _attempt(run, backend, request, option,
                                    previous=attempts[-1].job_id if attempts else None)
        attempts.append(attempt)
        if problem is None:
            return LaunchResult(job_id=job_id, platform=option.platform, region=attempt.region, option=option,
                                attempts=attempts)
        nxt = sequence[n + 1] if n + 1 < len(sequence) else None
        if nxt is None:
            raise TrainctlError(f"no capacity for any option tried ({', '.join(a.layout for a in attempts)}); "
                                f"last: {problem}", exit_code=EXIT_NO_CAPACITY)
        say(f"failover: {job_id} got no capacity ({problem}); moving to {nxt.describe()}")
        store.add_event(job_id, "failover", f"to option {nxt.rank} {nxt.layout}")
    raise AssertionError("unreachable: the loop returns or raises")


def _dry_run_document(backend, request, spec, option: Option, options: Any) -> dict:
    """The exact requests, and the settings that reach the job (what the summary of table mode shows): the
    arguments as the request sends them, the distribution's included where the platform has a choice of them."""
    from trainctl.catalog import load_catalog
    from trainctl.backends.features import ChoosesDistribution
    from trainctl.backends.job_args import job_settings

    kind = "torch_distributed"
    if isinstance(backend, ChoosesDistribution):
        kind = backend.distribution_kind(options, spec)
    return {**request.to_json(),
            "job_settings": job_settings(spec, option, load_catalog().instance(option.instance_type), kind)}


def _release(run: _Run) -> None:
    """The launch ended: free the spec's lock, and its marker when the launch started nothing."""
    from trainctl.usecases.launch.duplicates import ENDED

    if run.lock is not None:
        run.lock.close()
    if run.marker is not None and run.marker.etag is not None:
        try:
            record = run.store.job(run.marker.job_id)
        except Exception:  # noqa: BLE001 - no record to read: the marker frees itself after LAUNCHING_S
            return
        if record is not None and record.status in ENDED:
            run.marker.release(record.status)


def _claims(run: _Run) -> list[tuple[str, str]]:
    """What holds the spec besides this launch: another launch of it from this job store (the store's lock,
    kept until this launch ends, makes check-then-launch atomic here) and its jobs that AWS says run."""
    from trainctl.usecases.launch.duplicates import running_jobs_of

    run.lock, holder = run.store.try_lock_launch(run.spec.name)
    held = [] if run.lock is not None else [(f"another launch (pid {holder or '?'})", "launching it now, here")]
    return held + running_jobs_of(run.store, run.spec.name)


def _claim_marker(run: _Run, request) -> None:
    """Right before the job-starting call (the job bucket exists by then): take the spec's launch marker on
    AWS, which launches from other machines race for atomically; lost, the launch stops before starting."""
    from trainctl.usecases.launch.duplicates import LaunchMarker, duplicate_question

    if run.marker is not None and run.marker.etag is not None:  # a failover attempt: this launch holds it
        holders = run.marker.hand_over(request.job_id)
    else:
        run.marker = LaunchMarker(run.spec.name, request.job_id, request.platform, run.account or "",
                                  request.region)
        holders = run.marker.claim(time.time())
    if holders:
        raise TrainctlError(f"not launched: {duplicate_question(holders, run.spec.name)}; `trainctl stop "
                            f"{holders[0][0]}` first, or launch a second job on purpose with --allow-duplicate")


def _confirm(run: _Run, confirm: Callable[[str], bool], question: str) -> None:
    """Ask before launching (unless --yes); first, whether to run a second job of a spec whose job still runs
    or is being launched (under --yes that is refused unless --allow-duplicate)."""
    from trainctl.usecases.launch.duplicates import duplicate_question

    args = run.args
    running = [] if args.allow_duplicate else _claims(run)
    if running:
        said = duplicate_question(running, run.spec.name)
        if args.yes:
            raise TrainctlError(f"not launched: {said}; `trainctl stop {running[0][0]}` first, or launch a second "
                                "job on purpose with --allow-duplicate", exit_code=1)
        if not confirm(f"{said}. Launch a second one anyway?"):
            raise TrainctlError(f"not launched ({said})", exit_code=1)
    if not args.yes and not confirm(question):
        raise TrainctlError("not launched", exit_code=1)


def _foreign_topic(target: str | None, account: str | None, platform: str, previous: str | None, say) -> None:
    """Another account's SNS topic is accepted (a team's shared topic may be) but said, once per launch: that
    account reads every message (the job's status and dollars), and an EC2 job's nodes publish to it."""
    from trainctl.backends.notify_target import topic_account

    theirs = topic_account(target or "")
    if previous is None and theirs and account and theirs != account:
        say(f"warning: --notify {target} is a topic of account {theirs}, not of this one ({account}): that account "
            "reads the job's news (status and dollars)" + (" and the job's nodes may publish to it"
                                                           if _nodes_publish(platform) else ""))


def _nodes_publish(platform: str) -> bool:
    from trainctl.backends import backend_class
    from trainctl.backends.features import NodesPublishBudget

    return issubclass(backend_class(platform), NodesPublishBudget)


def _attempt(run: _Run, backend, request, option: Option, previous: str | None) -> tuple[Attempt, str | None]:
    """Record, submit and (with --failover) wait for capacity: the attempt, and why it got no capacity (None:
    it got it, or was not asked to wait). Raises what ends the launch."""
    from trainctl.backends.base import CapacityError

    job_id, store, say = request.job_id, run.store, run.say
    if run.account is None:
        run.account = _account(request.region)
    store.record_job(job_id=job_id, account=run.account, platform=request.platform, region=request.region,
                     spec_path=run.args.spec_path, spec_name=run.spec.name, model=run.spec.model.name,
                     batch_size=run.spec.workload.batch_size_per_accelerator, option=option,
                     plan_json=run.plan.model_dump_json(), status="Submitting", failover_from=previous)
    store.add_event(job_id, "launch", option.describe())
    remember_notify(store, job_id, run.args.platform_options.get("notify"), run.spec.constraints.budget_usd,
                    bool(run.args.platform_options.get("notify_private_address")))
    _foreign_topic(run.args.platform_options.get("notify"), run.account, request.platform, previous, say)
    attempt = Attempt(job_id=job_id, rank=option.rank, layout=option.layout, region=request.region,
                      outcome="submitted")
    # right before the job starts: the spec's launch marker, then the job's record in the account (shared_jobs)
    claim = (lambda: None) if run.args.allow_duplicate else (lambda: _claim_marker(run, request))
    record = shared_jobs.at_launch(run.spec, run.args.spec_path, request, option, previous, run.account, say)
    copy = resume.copier(run.resume, job_id, run.account, request.region, say) if run.resume else (lambda: None)
    trace = SubmitTrace(before_start=lambda: (claim(), record(), copy()))
    try:
        outputs = backend.submit(request, progress=lambda m: say(f"  {m}"), trace=trace)
    except KeyboardInterrupt:
        # Ctrl-C mid-submit: say exactly what went out and whether the job may run, then stop (a second
        # Ctrl-C must not land in a half-run cleanup).
        interrupted(store, request, trace, say)
        raise
    except CapacityError as e:
        # Refused at submit (EC2: no AZ gave all N instances). The backend already removed what it made.
        _no_capacity(store, job_id, str(e))
        if not run.args.failover:
            raise TrainctlError(f"launch of {job_id} got no capacity: {e}; try another option "
                                "(--option N) or let trainctl move on by itself (--failover)",
                                exit_code=EXIT_NO_CAPACITY) from e
        return attempt.model_copy(update={"outcome": f"no capacity: {e}"}), str(e)
    except Exception as e:  # noqa: BLE001 - recorded, resources removed by tag, then reported in one line
        submit_failed(store, backend, request, e, say, trace)
    after_submit(store, request, outputs, run.account, say)  # Ctrl-C there names the job that runs
    say(f"submitted {job_id} ({option.describe()})")
    if not run.args.failover:
        return attempt, None
    problem = None if backend.capabilities.capacity_at_submit else \
        wait_for_capacity(backend, job_id, request.region, run.args.poll_seconds, say)
    if problem is None:
        store.add_event(job_id, "capacity", "instances obtained; training started")
        return attempt.model_copy(update={"outcome": "running"}), None
    _no_capacity(store, job_id, problem)
    try:
        backend.cleanup(job_id, request.region)
    except Exception as e:  # noqa: BLE001 - a leftover security group is tagged; `down` can retry
        from trainctl.aws.clients import error_summary

        say(f"cleanup of {job_id} did not finish ({error_summary(e)})")
    return attempt.model_copy(update={"outcome": f"no capacity: {problem}"}), problem


def _no_capacity(store: JobStore, job_id: str, problem: str) -> None:
    store.set_status(job_id, "NoCapacity")
    store.add_event(job_id, "no-capacity", problem)

