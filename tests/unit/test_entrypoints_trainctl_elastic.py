"""A step's global batch cut into chunks and dealt to however many ranks there are (trainctl_elastic.py): every
chunk taken exactly once, the weights summing to the mean over the step's chunks, padding of weight 0 only."""
from __future__ import annotations

import pytest

from trainctl.entrypoints.trainctl_elastic import plan_chunks


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_every_chunk_of_a_step_is_taken_once_whatever_the_world_size(world):
    plans = [plan_chunks(8, 2, rank, world) for rank in range(world)]
    assert sorted(c for p in plans for c in p.mine) == [0, 1, 2, 3]
    assert {p.global_batch for p in plans} == {8}
    # the data-parallel average over `world` ranks of each rank's weighted sum: the mean over the 4 chunks
    for p in plans:
        assert len(p.padded()) == p.passes == -(-4 // world)
        assert sum(w for _, w in p.padded()) / world == pytest.approx(len(p.mine) / 4)
        assert all(w == 0.0 for _, w in p.padded()[len(p.mine):])


def test_the_fixed_size_default_is_one_chunk_per_rank_and_micro_batch():
    p = plan_chunks(None, 4, 1, 2, accum=3)
    assert (p.chunks, p.mine, p.passes, p.global_batch) == (6, [1, 3, 5], 3, 24)
    assert plan_chunks(None, 4, 0, 4).weight == 1.0   # today's step, unscaled


def test_a_global_batch_that_cannot_be_cut_is_one_line():
    with pytest.raises(SystemExit, match="not a whole number of --batch-size 3 micro-batches"):
        plan_chunks(8, 3, 0, 2)
    with pytest.raises(SystemExit, match="at least one for each of the 5 ranks"):
        plan_chunks(8, 2, 0, 5)
