"""Token batches for train_lm.py: synthetic sequences generated on the device, or windows of
pre-tokenized shards (.bin or .npy of uint16 or uint32 ids, e.g. the `train` channel).

Both are pure functions of (seed, step, rank, micro-batch): any batch can be regenerated
exactly, which is what makes a resumed run bit-identical to an uninterrupted one.
"""

from __future__ import annotations

import os

import numpy as np
import torch
from trainctl_runtime import mix_seed


class SyntheticTokens:
    """Sequences that a language model can learn, drawn on the device.

    A fixed permutation of the vocabulary (from the seed) defines a successor for every token;
    a sequence starts at a random token and follows successors, and a fraction of positions
    is replaced by uniform noise. A model that learns the successor table predicts all but the
    noise, so the loss falls from ln(vocab) towards the noise's share of it.
    """

    NOISE = 0.1

    def __init__(self, seed: int, vocab_size: int, seq_len: int, ops) -> None:
        self.seed, self.vocab_size, self.seq_len, self.ops = seed, vocab_size, seq_len, ops
        generator = torch.Generator().manual_seed(mix_seed(seed, "successors"))
        # Made on the CPU so the task is the same on every device kind.
        self.order = torch.randperm(vocab_size, generator=generator).to(ops.device)

    def batch(self, step: int, rank: int, micro: int, batch_size: int) -> torch.Tensor:
        """(batch, seq_len + 1) int64 tokens: inputs are [:, :-1], targets [:, 1:]."""
        generator = self.ops.generator(mix_seed(self.seed, "tokens", step, rank, micro))
        device, length = self.ops.device, self.seq_len + 1
        start = torch.randint(0, self.vocab_size, (batch_size, 1), generator=generator,
                              device=device)
        positions = (start + torch.arange(length, device=device)) % self.vocab_size
        tokens = self.order[positions]
        noise = torch.randint(0, self.vocab_size, (batch_size, length), generator=generator,
                              device=device)
        noisy = torch.rand((batch_size, length), generator=generator, device=device) < self.NOISE
        return torch.where(noisy, noise, tokens)


TOKEN_SUFFIXES = (".bin", ".npy")


def find_token_files(data_dir: str, name: str | None) -> list[str]:
    """--data-file inside the data folder, or every .bin and .npy token shard in it, in name order."""
    if name:
        path = os.path.join(data_dir, name)
        if not os.path.isfile(path):
            raise SystemExit(f"trainctl: token file {path} not found (--data-file)")
        return [path]
    found = sorted(entry for entry in os.listdir(data_dir) if entry.endswith(TOKEN_SUFFIXES))
    if not found:
        raise SystemExit(f"trainctl: {data_dir} holds no .bin or .npy token shards; name one with --data-file")
    return [os.path.join(data_dir, entry) for entry in found]


def _open_tokens(path: str, dtype: str) -> np.ndarray:
    """A shard memory-mapped: a raw .bin of --token-dtype ids (nanoGPT's and Megatron's layout), or a 1-D .npy of
    unsigned 16- or 32-bit ids (its own header says which)."""
    if not path.endswith(".npy"):
        return np.memmap(path, dtype=np.dtype(dtype), mode="r")
    tokens = np.load(path, mmap_mode="r")
    if tokens.ndim != 1 or tokens.dtype not in (np.uint16, np.uint32):
        raise SystemExit(f"trainctl: {path} holds {tokens.dtype} of shape {tokens.shape}; a token shard is a 1-D "
                         "array of uint16 or uint32 ids")
    return tokens


class TokenShards:
    """Random windows of seq_len + 1 tokens from one or more token shards, memory-mapped: the OS pages in what is
    read. A window lies within one shard; its start is drawn uniformly over every shard's valid starts from a stream
    seeded by (seed, step, rank, micro-batch), so any batch is the same on every run and after any resume."""

    def __init__(self, paths: list[str], dtype: str, seed: int, vocab_size: int, seq_len: int,
                 device: torch.device) -> None:
        self.shards = [_open_tokens(path, dtype) for path in paths]
        self.paths, self.seed, self.vocab_size = paths, seed, vocab_size
        self.seq_len, self.device = seq_len, device
        self.starts = np.cumsum([0] + [max(0, len(t) - seq_len - 1) for t in self.shards])
        self.rows_read = 0
        if self.starts[-1] <= 0:
            raise SystemExit(f"trainctl: {', '.join(paths[:3])}: no shard holds one sequence of {seq_len + 1} "
                             "tokens; lower --seq-len")

    @property
    def kind(self) -> str:
        return f"{len(self.shards)} token shard{'s' if len(self.shards) > 1 else ''}"

    def batch(self, step: int, rank: int, micro: int, batch_size: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(mix_seed(self.seed, "windows", step, rank,
                                                           micro))
        picks = torch.randint(0, int(self.starts[-1]), (batch_size,), generator=generator).tolist()
        rows = []
        for pick in picks:
            shard = int(np.searchsorted(self.starts, pick, side="right")) - 1
            start = pick - int(self.starts[shard])
            rows.append(self.shards[shard][start:start + self.seq_len + 1])
        rows = np.stack(rows).astype(np.int64)
        top = int(rows.max())
        if top >= self.vocab_size:
            raise SystemExit(f"trainctl: {self.paths[0]} holds token id {top}, beyond the model's "
                             f"vocabulary of {self.vocab_size}; set --vocab-size or --token-dtype")
        self.rows_read += batch_size
        return torch.from_numpy(rows).to(self.device, non_blocking=True)
