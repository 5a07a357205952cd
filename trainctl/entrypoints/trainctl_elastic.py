"""The global batch of an optimizer step, split over however many ranks the job has now.

An elastic job (EC2, `elastic: {min_nodes: N}`) may train on fewer nodes while a reclaimed one is replaced. The
bundled scripts keep the optimizer step the same whatever the world size: a step processes the same GLOBAL batch,
cut into `chunks` micro-batches of --batch-size samples. Chunk c of step s is defined by (s, c) alone (the data
sources draw it from the global sample index s x global batch + c x batch size), never by a rank, so a run that
went 4 -> 3 -> 4 nodes feeds the same samples to the same optimizer steps as an uninterrupted 4-node run.

The ranks deal the chunks round-robin: rank r takes chunks r, r + W, r + 2W, ... (W ranks). Each chunk's mean loss
is weighted by W / chunks, so after the data-parallel average over the W ranks the gradient is the mean over the
step's chunks, as on the full layout. With W not dividing the chunks, ranks take one chunk more or less; where every
rank must run the same number of micro-batches (FSDP reduce-scatters each one), the short ranks run a padding
micro-batch of weight 0, whose gradient adds exactly nothing.

Plain module beside the scripts (``import trainctl_elastic``); no torch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChunkPlan:
    """Which chunks of each optimizer step this rank processes."""

    chunks: int        # micro-batches of --batch-size in one step's global batch
    batch_size: int    # samples per micro-batch (per rank per forward pass)
    rank: int
    world_size: int

    @property
    def global_batch(self) -> int:
        return self.chunks * self.batch_size

    @property
    def mine(self) -> list[int]:
        """This rank's chunks of every step, in order."""
        return list(range(self.rank, self.chunks, self.world_size))

    @property
    def passes(self) -> int:
        """Micro-batches every rank runs when all must run the same number (the most any rank has)."""
        return -(-self.chunks // self.world_size)

    def padded(self) -> list[tuple[int, float]]:
        """(chunk, weight) for each of `passes` micro-batches: this rank's chunks, then weight-0 repeats of its
        first one (a rank always has one: chunks >= world size)."""
        weight = self.world_size / self.chunks
        mine = [(chunk, weight) for chunk in self.mine]
        return mine + [(mine[0][0], 0.0)] * (self.passes - len(mine))

    @property
    def weight(self) -> float:
        """A chunk's loss weight: the data-parallel average over the ranks then gives the mean over the chunks."""
        return self.world_size / self.chunks


def plan_chunks(global_batch: int | None, batch_size: int, rank: int, world_size: int,
                accum: int = 1) -> ChunkPlan:
    """The plan for --global-batch-size (None: --batch-size x ranks x `accum`, the fixed-size default). Exits with
    one line when the global batch cannot be cut into micro-batches for these ranks."""
    if global_batch is None:
        return ChunkPlan(batch_size * world_size * accum // batch_size, batch_size, rank, world_size)
    chunks, rest = divmod(global_batch, batch_size)
    if rest or chunks < world_size:
        raise SystemExit(
            f"trainctl: --global-batch-size {global_batch} is not a whole number of --batch-size {batch_size} "
            f"micro-batches, at least one for each of the {world_size} ranks; change one of them")
    return ChunkPlan(chunks, batch_size, rank, world_size)
