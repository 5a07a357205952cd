"""Launch orchestration, the same for every platform: choose an option (re-plan, a saved plan, or an
exact layout), prepare (reads only), show, confirm, submit exactly what was shown, fail over to the
next-ranked option when capacity is refused, and record every attempt in the state database."""
from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from trainctl import state
from trainctl.errors import TrainctlError, UsageError

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
    poll_seconds: float = 10.0        # how often a --failover launch checks that the job got capacity
    # the platform flags given (backends/options.py declares them); each backend resolves its own, typed
    platform_options: dict = field(default_factory=dict)


def new_job_id(spec_name: str) -> str:
    # SageMaker job names: <= 63 chars of [a-zA-Z0-9-]; leave room for a failover suffix (-f9).
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return f"{spec_name[:36].strip('-')}-{stamp}-{secrets.token_hex(2)}"


def choose_options(args: LaunchArgs) -> tuple[Any, dict, list[dict], int]:
    """(spec, plan document, options that have a backend in rank order, index of the chosen one)."""
    from trainctl.backends import BACKENDS
    from trainctl.spec import load_spec

    if args.plan_path and args.layouts:
        raise UsageError("give --plan or --layout, not both")
    if args.plan_path:
        from pathlib import Path

        try:  # a FIFO or a device would block the read: only regular files are plans
            if not Path(args.plan_path).is_file():
                raise UsageError(f"--plan {args.plan_path}: no such file (save a plan with `trainctl plan SPEC -o json "
                                 "> plan.json`)")
            with open(args.plan_path) as f:
                plan_doc = json.load(f)
        except (OSError, ValueError, RecursionError) as e:
            raise UsageError(f"--plan {args.plan_path}: not a JSON plan ({e.__class__.__name__}: "
                             f"{' '.join(str(e).split())[:160]})") from None
        if not isinstance(plan_doc, dict) or not isinstance(plan_doc.get("options"), list):
            raise UsageError(f"--plan {args.plan_path}: not a plan (save one with `trainctl plan SPEC -o json`)")
        spec = load_spec(args.spec_path)
        options = list(plan_doc["options"])
        for i, o in enumerate(options):
            problem = plan_option_problem(o)
            if problem:
                raise UsageError(f"--plan {args.plan_path}: options[{i}]: {problem}; save the plan again with "
                                 "`trainctl plan SPEC -o json`")
    else:
        from trainctl.planning import PlanInputs, make_plan

        spec, plan = make_plan(PlanInputs(spec_path=args.spec_path, objective=args.objective, layouts=args.layouts,
                                          platform=args.platform, offline=args.offline))
        plan_doc = plan.model_dump(mode="json")
        options = plan_doc["options"]
    if args.platform:
        options = [o for o in options if o.get("platform") == args.platform]
    if not options:
        raise TrainctlError("the plan has no option to launch (`trainctl plan SPEC --show-excluded` says why)",
                            exit_code=3)
    if args.option_rank is not None:
        idx = next((i for i, o in enumerate(options) if o.get("rank") == args.option_rank), None)
        if idx is None:
            raise UsageError(f"--option {args.option_rank}: the plan's ranks are "
                             f"{', '.join(str(o.get('rank')) for o in options[:20])}")
    else:
        idx = next((i for i, o in enumerate(options) if o.get("platform") in BACKENDS), None)
        if idx is None:
            raise UsageError(f"no option of the plan is on a platform trainctl can launch yet "
                             f"({', '.join(sorted(BACKENDS))}); try --platform sagemaker")
    return spec, plan_doc, options, idx


def plan_option_problem(o: Any) -> str | None:
    """What makes a saved plan's option unusable by launch (a hand-edited or foreign file), or None."""
    import math
    import re

    from trainctl.catalog import load_catalog
    from trainctl.spec import MAX_NODES

    if not isinstance(o, dict):
        return f"an option is a JSON object, not {type(o).__name__}"
    checks = (("platform", lambda v: v in ("sagemaker", "ec2"), "sagemaker or ec2"),
              ("instance_type", lambda v: isinstance(v, str) and v in load_catalog().instances,
               "an instance type of `trainctl catalog`"),
              ("count", lambda v: type(v) is int and 1 <= v <= MAX_NODES, f"a whole number from 1 to {MAX_NODES}"),
              ("market", lambda v: v in ("spot", "on-demand"), "spot or on-demand"),
              ("region", lambda v: isinstance(v, str) and re.fullmatch(r"[a-z]{2}(-gov)?-[a-z]+-\d", v) is not None,
               "an AWS region name such as us-east-1"))
    for key, ok, what in checks:
        if not ok(o.get(key)):
            return f"'{key}' must be {what}"
    for key in ("rank", "accelerators"):
        if o.get(key) is not None and type(o[key]) is not int:
            return f"'{key}' must be a whole number"
    for key in ("hours", "expected_cost_usd", "hourly_usd", "throughput_samples_per_s"):
        v = o.get(key)
        if v is not None and (type(v) not in (int, float) or not math.isfinite(v) or v < 0):
            return f"'{key}' must be a number >= 0"
    az = o.get("availability_zone")
    if az is not None and not (isinstance(az, str) and re.fullmatch(r"[a-z]{2}(-gov)?-[a-z]+-\d[a-z]", az)):
        return "'availability_zone' must be an AZ name such as us-east-1a, or null"
    return None


def describe_option(o: dict) -> str:
    where = o.get("availability_zone") or o.get("region")
    return (f"option {o.get('rank')}: {o['count']} x {o['instance_type']} {o['market']} on {o['platform']} in {where}: "
            f"expected {o.get('hours') or 0:.2f} h, ${o.get('expected_cost_usd') or 0:,.2f} "
            f"(${o.get('hourly_usd') or 0:,.2f}/h, {o.get('throughput_samples_per_s') or 0:,.0f} samples/s "
            f"{o.get('throughput_source') or ''})")


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


def set_status(job_id: str, status: str) -> None:
    from contextlib import closing

    with closing(state.connect()) as conn, conn:
        conn.execute("UPDATE jobs SET status=?, updated_at=? WHERE job_id=?", (status, time.time(), job_id))


def launch(args: LaunchArgs, say: Callable[[str], None], show: Callable[[Any], None],
           confirm: Callable[[str], bool]) -> dict:
    """Returns the --dry-run document (dry run) or {"job_id", ..., "attempts"}."""
    from trainctl.backends import BACKENDS, get_backend
    from trainctl.backends.base import CapacityError, LaunchSettings
    from trainctl.plans import Option

    spec, plan_doc, options, idx = choose_options(args)
    sequence = [options[idx]]
    if args.failover:
        sequence += [o for o in options[idx + 1:] if o.get("platform") in BACKENDS]
    base_id = new_job_id(spec.name)
    attempts: list[dict] = []
    previous: str | None = None
    for n, option in enumerate(sequence):
        job_id = base_id if n == 0 else f"{base_id}-f{n}"
        backend = get_backend(option["platform"])
        settings = LaunchSettings(job_id=job_id, spec_path=args.spec_path, options=backend.options(
            args.platform_options, f"option {option.get('rank')}"))
        request = backend.prepare(Option.model_validate(option), spec, settings)
        if args.dry_run:
            return request.to_json()
        show(request)
        if n == 0 and not args.yes and not confirm(f"Launch {job_id} ({len(request.calls)} AWS calls)?"):
            raise TrainctlError("not launched", exit_code=1)
        recorded = {**option, "failover_from": previous} if previous else option
        state.record_job(job_id, request.platform, request.region, args.spec_path, spec.name, spec.model.name,
                         spec.workload.batch_size_per_accelerator, recorded, plan_doc, "Submitting")
        state.add_event(job_id, "launch", describe_option(option))
        try:
            outputs = backend.submit(request, progress=lambda m: say(f"  calling {m}"))
        except KeyboardInterrupt:
            # Ctrl-C mid-submit: what was created carries the job's tag; say how to remove it, and stop
            # (a second Ctrl-C must not land in a half-run cleanup).
            set_status(job_id, "Interrupted")
            state.add_event(job_id, "interrupted", "Ctrl-C during submit")
            say(f"interrupted: `trainctl down {job_id}` removes what the launch created (tagged trainctl:job={job_id})"
                + ("; if CreateTrainingJob reached SageMaker, `trainctl stop` the job first"
                   if request.platform == "sagemaker" else ""))
            raise
        except CapacityError as e:
            # Refused at submit (EC2: no AZ gave all N instances). The backend already removed what it made.
            problem = str(e)
            attempt = {"job_id": job_id, "rank": option.get("rank"), "layout": _layout(option),
                       "region": request.region, "outcome": f"no capacity: {problem}"}
            attempts.append(attempt)
            set_status(job_id, "NoCapacity")
            state.add_event(job_id, "no-capacity", problem)
            if not args.failover:
                raise TrainctlError(f"launch of {job_id} got no capacity: {problem}; try another option "
                                    "(--option N) or let trainctl move on by itself (--failover)",
                                    exit_code=EXIT_NO_CAPACITY) from e
        except Exception as e:  # noqa: BLE001 - recorded, resources removed by tag, then reported in one line
            from trainctl.aws import error_summary

            set_status(job_id, "SubmitFailed")
            state.add_event(job_id, "submit-failed", error_summary(e))
            try:
                removed = backend.cleanup(job_id, request.region)
                if removed:
                    say(f"removed after the failed launch: {', '.join(removed)}")
            except Exception as ce:  # noqa: BLE001 - the launch error matters more; cleanup can be re-run
                say(f"cleanup after the failed launch did not finish ({error_summary(ce)})")
            raise TrainctlError(f"launch of {job_id} failed: {error_summary(e)}") from e
        else:
            set_status(job_id, "InProgress")
            state.add_event(job_id, "submitted",
                            json.dumps({k: v for k, v in outputs.items() if isinstance(v, str)}))
            attempt = {"job_id": job_id, "rank": option.get("rank"), "layout": _layout(option),
                       "region": request.region, "outcome": "submitted"}
            attempts.append(attempt)
            say(f"submitted {job_id} ({describe_option(option)})")
            if not args.failover:
                break
            problem = None if backend.capabilities.capacity_at_submit else \
                wait_for_capacity(backend, job_id, request.region, args.poll_seconds, say)
            if problem is None:
                attempt["outcome"] = "running"
                state.add_event(job_id, "capacity", "instances obtained; training started")
                break
            attempt["outcome"] = f"no capacity: {problem}"
            set_status(job_id, "NoCapacity")
            state.add_event(job_id, "no-capacity", problem)
            try:
                backend.cleanup(job_id, request.region)
            except Exception as e:  # noqa: BLE001 - a leftover security group is tagged; `cleanup` can retry
                from trainctl.aws import error_summary

                say(f"cleanup of {job_id} did not finish ({error_summary(e)})")
        nxt = sequence[n + 1] if n + 1 < len(sequence) else None
        if nxt is None:
            raise TrainctlError(f"no capacity for any option tried ({', '.join(a['layout'] for a in attempts)}); "
                                f"last: {problem}", exit_code=EXIT_NO_CAPACITY)
        say(f"failover: {job_id} got no capacity ({problem}); moving to {describe_option(nxt)}")
        state.add_event(job_id, "failover", f"to option {nxt.get('rank')} {_layout(nxt)}")
        previous = job_id
    final = attempts[-1]
    return {"job_id": final["job_id"], "platform": sequence[len(attempts) - 1]["platform"],
            "region": final["region"], "option": sequence[len(attempts) - 1], "attempts": attempts}


def _layout(o: dict) -> str:
    return f"{o['instance_type']}:{o['count']}:{o['market']}"
