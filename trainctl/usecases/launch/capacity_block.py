"""A Capacity Block option at launch: its fee, dates and AZ said in full, and never bought implicitly.

Buying a block cannot be undone (EC2 User Guide, "Capacity Blocks pricing and billing": the fee is charged when it
is bought), so `--yes` never buys one and `--failover` never moves onto one. trainctl does not yet buy a block and
launch into its reservation when it starts; until it does, a launch on a block option stops before any AWS call and
says how to buy it by hand or which option to launch instead.
"""
from __future__ import annotations

from trainctl.errors import TrainctlError
from trainctl.plans import Option

MARKET = "capacity-block"


def block_words(option: Option) -> str:
    b = option.capacity_block
    if b is None:
        return f"option {option.rank} is a capacity block"
    return (f"option {option.rank} is EC2 Capacity Block {b.offering_id}: {option.count} x {option.instance_type} in "
            f"{b.availability_zone}, ${b.upfront_fee_usd:,.2f} paid up front whether used or not, from {b.start} to "
            f"{b.end} ({b.duration_hours:g} h, {b.unused_hours:.1f} h of it unused by this job)")


def refuse(option: Option, options: list[Option]) -> TrainctlError:
    """The one-line refusal of a launch on a block option (exit 2): what it would buy, that it cannot be undone,
    and what to do instead. Nothing is bought and nothing is created."""
    other = next((o for o in options if o.market != MARKET), None)
    instead = (f"launch option {other.rank} ({other.count} x {other.type_label} {other.market} on {other.platform}) "
                f"with --option {other.rank}") if other else \
        "plan again without it"
    b = option.capacity_block
    by_hand = (f"buy it yourself (`aws ec2 purchase-capacity-block --capacity-block-offering-id {b.offering_id} "
               f"--instance-platform Linux/UNIX --region {option.region}`) " if b else "")
    return TrainctlError(f"not launched, nothing bought: {block_words(option)}; buying it cannot be undone, --yes "
                         f"never buys it and trainctl does not buy blocks yet: {by_hand}or {instead}", exit_code=2)


def without_blocks(options: list[Option]) -> list[Option]:
    """What --failover may move onto: never a block (buying one needs its own decision)."""
    return [o for o in options if o.market != MARKET]
