"""The node agent's Capacity Block end (trainctl/bootstrap/block_end.py): it acts at EC2's 40-minute warning, once,
as on a Spot notice, only inside a block; and the agent ships it."""
from __future__ import annotations

import io
import tarfile
import threading

from trainctl.bootstrap import NODE_PACKAGE, agent_archive
from trainctl.bootstrap.block_end import stop_at, watch

END = 1_800_000_000


class _NoWait(threading.Event):
    """The agent's end event, whose waits return at once (the clock above is what moves)."""
    def wait(self, timeout=None):
        return self.is_set()


def test_a_node_in_a_block_stops_at_ec2_s_warning_40_minutes_before_the_end():
    assert stop_at({}) is None
    assert stop_at({"capacity_block_end": END}) == END - 40 * 60
    assert stop_at({"capacity_block_end": END, "capacity_block_stop_lead_s": 600}) == END - 600


def test_the_watcher_acts_once_when_the_time_comes_and_never_after_the_agent_ended():
    said: list[str] = []
    times = iter([END - 40 * 60 - 0.01, END - 40 * 60])   # just before, then at the stop time
    watch({"capacity_block_end": END}, threading.Event(), said.append, clock=lambda: next(times))
    assert len(said) == 1 and "capacity block ends at 2027-01-15 08:00 UTC" in said[0]
    ended = threading.Event()
    ended.set()
    watch({"capacity_block_end": END}, ended, said.append, clock=lambda: END)
    watch({}, threading.Event(), said.append, clock=lambda: END)               # not in a block: nothing to watch
    assert len(said) == 1


def test_the_node_agent_ships_its_block_end_module():
    with tarfile.open(fileobj=io.BytesIO(agent_archive())) as tar:
        assert f"{NODE_PACKAGE}/block_end.py" in tar.getnames()


def test_the_end_read_again_moves_the_stop_and_a_failed_read_keeps_the_last_known_end():
    """An extension moves the end later (no stop at the old time); a block whose end EC2 now says is near stops;
    a read that fails (None) keeps the end last known."""
    said: list[str] = []
    ends = iter([END + 24 * 3600, None, END - 3600])          # extended, unreadable, then (sandbox) shortened
    times = iter([END - 40 * 60, END - 40 * 60, END - 3600 - 40 * 60])
    watch({"capacity_block_end": END}, _NoWait(), said.append, clock=lambda: next(times), read_end=lambda: next(ends))
    assert len(said) == 1 and "capacity block ends at 2027-01-15 07:00 UTC" in said[0]
