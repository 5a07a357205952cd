"""A Capacity Block option at launch: bought only on its own flag, never twice, launched into once it starts.

Buying a block cannot be undone (EC2 User Guide, "Capacity Blocks pricing and billing": the fee is charged when it
is bought; CancelCapacityReservation: a Capacity Block cannot be cancelled), so `--yes` never buys one and
`--failover` never moves onto one: `launch --buy-capacity-block` does, after saying the fee and the dates (and,
without --yes, asking once more). `--dry-run` shows the exact PurchaseCapacityBlock request and buys nothing.

Never twice: the reservation a purchase becomes carries the job's and the spec's tags, and before buying the launch
reads the blocks the account holds for the spec (DescribeCapacityReservations); one of the type that is scheduled
or active, holds the nodes and lasts the job's hours is used instead of buying another.

A block that has not started: EC2 refuses launches into it before its start. The launch records the job as
WaitingForBlock (`ls` and `watch` say "waiting for the block, starts ...") and returns; the same
`trainctl launch SPEC` once the block has started (the plan offers the held block first, at no new cost, so no
flag is needed) buys nothing and launches the waiting job into it under the same job id.

SageMaker training plans go the same way (CreateTrainingPlan, then CreateTrainingJob with the plan's ARN): what
differs is the backend's (backends/features.BuysCapacityBlocks: the module that reads and buys, what the capacity is
called, and how long before the start the platform queues a job: SageMaker keeps a job on a Scheduled plan Pending,
so it is submitted at once when the plan starts within that time).
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Callable

from trainctl.errors import TrainctlError, UsageError
from trainctl.plans import Option
from trainctl.usecases.jobs.block_wait import WAITING, waiting_words

MARKET = "capacity-block"
RECLAIM_BEFORE_END_H = 0.5       # EC2 terminates a block's instances from 30 minutes before its end


def _buys(option: Option):
    from trainctl.backends import backend_class

    return backend_class(option.platform)


def kind(option: Option) -> str:
    return _buys(option).reserved_kind


def block_words(option: Option) -> str:
    b = option.capacity_block
    if b is None:
        return f"option {option.rank} is a {kind(option)}"
    title = "EC2 Capacity Block" if kind(option) == "capacity block" else kind(option)
    return (f"option {option.rank} is {title} {b.offering_id}: {option.count} x {option.instance_type} in "
            f"{b.availability_zone}, ${b.upfront_fee_usd:,.2f} paid up front whether used or not, from {b.start} to "
            f"{b.end} ({b.duration_hours:g} h, {b.unused_hours:.1f} h of it unused by this job)")


def to_buy(option: Option) -> bool:
    """A block option whose block is still to buy (an offer, not a reservation the account holds)."""
    return option.market == MARKET and (option.capacity_block is None or option.capacity_block.reservation_id is None)


def refuse(option: Option, options: list[Option]) -> TrainctlError:
    """The one-line refusal of a launch on a block offer without --buy-capacity-block (exit 2): what it would
    buy, that it cannot be undone, and what to do instead. Nothing is bought and nothing is created."""
    other = next((o for o in options if o.market != MARKET), None)
    instead = (f"launch option {other.rank} ({other.count} x {other.type_label} {other.market} on {other.platform}) "
               f"with --option {other.rank}") if other else "plan again without it"
    return TrainctlError(f"not launched, nothing bought: {block_words(option)}; buying it cannot be undone and --yes "
                         f"never buys it: add --buy-capacity-block to buy it and launch into it (--dry-run shows the "
                         f"purchase), or {instead}", exit_code=2)


def without_blocks(options: list[Option]) -> list[Option]:
    """What --failover may move onto: never a block (buying one needs its own decision)."""
    return [o for o in options if o.market != MARKET]


def _hours(a: datetime, b: datetime) -> float:
    return (b - a).total_seconds() / 3600


def _utc(t) -> datetime:
    t = t if isinstance(t, datetime) else datetime.fromisoformat(str(t))
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


def fits(reservation: dict, option: Option, now: datetime) -> bool:
    """A held block serves the job: its type, enough instances, and the job's hours before the reclaim."""
    left = _hours(max(now, _utc(reservation["StartDate"])), _utc(reservation["EndDate"])) - RECLAIM_BEFORE_END_H
    return (reservation["InstanceType"] == option.instance_type and left >= option.hours
            and int(reservation.get("TotalInstanceCount", 0)) >= option.count)


def with_reservation(option: Option, reservation: dict, now: datetime, fee: float | None = None) -> Option:
    """The option on the bought block: its reservation, AZ and dates (a held block's fee is already paid)."""
    start, end = _utc(reservation["StartDate"]), _utc(reservation["EndDate"])
    b = option.capacity_block
    terms = b.model_copy(update={
        "reservation_id": reservation["CapacityReservationId"], "availability_zone": reservation["AvailabilityZone"],
        "start": start.isoformat(), "end": end.isoformat(), "duration_hours": _hours(start, end),
        "wait_hours": max(0.0, _hours(now, start)), "unused_hours": max(0.0, _hours(start, end) - option.hours),
        "upfront_fee_usd": b.upfront_fee_usd if fee is None else fee})
    return option.model_copy(update={"capacity_block": terms, "availability_zone": terms.availability_zone})


def secure(option: Option, spec_name: str, job_id: str, *, dry_run: bool, yes: bool,
           confirm: Callable[[str], bool], say: Callable[[str], None],
           check: Callable[[Option], None] = lambda o: None) -> tuple[Option, dict | None]:
    """(the option on its reservation, the purchase request --dry-run shows or None). Uses a block the account
    holds for the spec when one serves; otherwise buys the offer (not under --dry-run), once `check(option)` (the
    launch prepared, reads only) has passed: what cannot be launched is never bought."""
    platform = _buys(option)
    aws_blocks, what = platform.reservations(), platform.reserved_kind
    b, now = option.capacity_block, datetime.now(timezone.utc)
    if b is None or b.reservation_id:
        if b is not None:
            say(f"{what} {b.reservation_id} is the account's already ({b.start} to {b.end}): buying nothing")
        return option, None
    held = [r for r in aws_blocks.held_blocks(option.region, option.instance_type, spec_name) if fits(r, option, now)]
    if held:
        r = held[0]
        say(f"{what} {r['CapacityReservationId']} ({r['State']}, {_utc(r['StartDate']).isoformat()} to "
            f"{_utc(r['EndDate']).isoformat()}) was bought for {spec_name} by an earlier launch: using it, buying nothing")
        return with_reservation(option, r, now, fee=0.0), None
    params = aws_blocks.purchase_params(b.offering_id, job_id, spec_name)
    if dry_run:
        return option, {"operation": platform.purchase_operation, "region": option.region, "params": params,
                        "upfront_fee_usd": b.upfront_fee_usd, "start": b.start, "end": b.end,
                        "note": "bought before the launch's calls; it cannot be undone or cancelled"}
    check(option)
    say(f"buying: {block_words(option)}; the purchase cannot be undone and the {what} cannot be cancelled")
    if not yes and not confirm(f"Buy {what} {b.offering_id} for ${b.upfront_fee_usd:,.2f}?"):
        raise TrainctlError("not bought, not launched", exit_code=1)
    bought = aws_blocks.purchase(option.region, params)
    say(f"bought {what} {b.offering_id}: reservation {bought['CapacityReservationId']} in "
        f"{bought['AvailabilityZone']}, ${b.upfront_fee_usd:,.2f} charged, {_utc(bought['StartDate']).isoformat()} to "
        f"{_utc(bought['EndDate']).isoformat()}")
    return with_reservation(option, bought, now), None


def started(option: Option, now: datetime | None = None) -> bool:
    """The job can be submitted now: its reservation has started, or starts within the time its platform queues a
    job for it (SageMaker: a job on a Scheduled training plan waits Pending)."""
    b = option.capacity_block
    ahead = timedelta(hours=_buys(option).queues_before_start_hours) if b is not None else timedelta(0)
    return b is None or _utc(b.start) <= (now or datetime.now(timezone.utc)) + ahead


def waiting_job(store, spec_name: str, reservation_id: str) -> str | None:
    """The job an earlier launch recorded as waiting for this block, which the launch now starts."""
    from trainctl.usecases.launch.duplicates import RECENT

    return next((j.job_id for j in store.jobs(RECENT) if j.spec_name == spec_name and j.status == WAITING
                 and j.option is not None and j.option.capacity_block is not None
                 and j.option.capacity_block.reservation_id == reservation_id), None)


def on_block(run, option: Option, options: list[Option], confirm: Callable[[str], bool]):
    """The chosen block option made launchable: refused without --buy-capacity-block while it is an offer (not
    under --dry-run, which buys nothing), bought or found held, the job id chosen (a job waiting for this block is
    the one launched). Returns the option on its reservation, or the LaunchResult of a job left waiting for it."""
    from trainctl.usecases.launch.results import new_job_id

    from trainctl.backends.features import BuysCapacityBlocks

    args = run.args
    platform = _buys(option)
    if not issubclass(platform, BuysCapacityBlocks):  # offered in the plan, but this backend cannot buy it
        raise TrainctlError(f"not launched, nothing bought: option {option.rank} is reserved {platform.title} "
                            f"capacity ({option.capacity_block.offering_id if option.capacity_block else '?'}); "
                            "trainctl cannot buy it on this platform: buy it with AWS's console or CLI, or launch "
                            "another option with --option N", exit_code=2)
    if to_buy(option) and not args.buy_capacity_block and not args.dry_run:
        raise refuse(option, options)
    run.job_id = new_job_id(run.spec.name)
    option, run.purchase = secure(option, run.spec.name, run.job_id, dry_run=args.dry_run, yes=args.yes,
                                  confirm=confirm, say=run.say, check=lambda o: _prepares(run, o))
    rid = option.capacity_block.reservation_id if option.capacity_block else None
    run.job_id = (waiting_job(run.store, run.spec.name, rid) if rid else None) or run.job_id
    if args.dry_run or started(option):
        return option
    return _record_waiting(run, option)


def _prepares(run, option: Option) -> None:
    """The launch's request made once before the purchase (reads only; its reservation still a placeholder): a
    spec, network or data problem stops the launch before the fee is charged."""
    from trainctl.backends import get_backend
    from trainctl.backends.base import LaunchSettings

    backend = get_backend(option.platform)
    backend.prepare(option, run.spec, LaunchSettings(job_id=run.job_id, spec_path=run.args.spec_path, options=backend.options(
        run.args.platform_options, f"option {option.rank}")))


def not_a_block(args, option: Option) -> None:
    """--buy-capacity-block asks for a block: a launch whose chosen option is something else is refused, not run
    on another market unasked."""
    if args.buy_capacity_block and option.market != MARKET:
        raise UsageError(f"--buy-capacity-block: the chosen option {option.rank} is {option.count} x "
                         f"{option.type_label} {option.market} on {option.platform}, not a capacity block; choose a "
                         "block option with --option N (`trainctl plan SPEC` lists them) or drop the flag")


def _record_waiting(run, option: Option):
    """The block is bought and starts later: the job is recorded as waiting for it, nothing else is made."""
    from trainctl.usecases.launch.results import Attempt, LaunchResult, account as _account

    args, spec, job_id = run.args, run.spec, run.job_id
    run.store.record_job(job_id=job_id, account=_account(option.region), platform=option.platform,
                         region=option.region, spec_path=args.spec_path, spec_name=spec.name, model=spec.model.name,
                         batch_size=spec.workload.batch_size_per_accelerator, option=option,
                         plan_json=run.plan.model_dump_json(), status=WAITING, failover_from=None)
    said = waiting_words(option)
    run.store.add_event(job_id, "capacity-block", said)
    run.say(f"{job_id}: {said}; nothing is launched before it: once it has started, `trainctl launch "
            f"{args.spec_path} --buy-capacity-block` buys nothing again and launches this job into it")
    return LaunchResult(job_id=job_id, platform=option.platform, region=option.region, option=option,
                        attempts=[Attempt(job_id=job_id, rank=option.rank, layout=option.layout,
                                          region=option.region, outcome=said)])
