"""Token batches for train_lm.py: synthetic sequences generated on the device, or windows of a
tokenized binary file (uint16 or uint32 tokens, e.g. from the SageMaker data channel).

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


def find_token_file(data_dir: str, name: str | None) -> str:
    """--data-file inside the data folder, or the folder's only .bin file."""
    if name:
        path = os.path.join(data_dir, name)
        if not os.path.isfile(path):
            raise SystemExit(f"trainctl: token file {path} not found (--data-file)")
        return path
    found = sorted(entry for entry in os.listdir(data_dir) if entry.endswith(".bin"))
    if len(found) != 1:
        raise SystemExit(f"trainctl: {data_dir} holds {len(found)} .bin token files; name one "
                         "with --data-file")
    return os.path.join(data_dir, found[0])


class TokenFile:
    """Random windows of seq_len + 1 tokens from a flat binary file of token ids (the layout
    nanoGPT and Megatron's raw bins use), memory-mapped: the OS pages in what is read."""

    def __init__(self, path: str, dtype: str, seed: int, vocab_size: int, seq_len: int,
                 device: torch.device) -> None:
        self.tokens = np.memmap(path, dtype=np.dtype(dtype), mode="r")
        self.path, self.seed, self.vocab_size = path, seed, vocab_size
        self.seq_len, self.device = seq_len, device
        if len(self.tokens) <= seq_len + 1:
            raise SystemExit(f"trainctl: {path} has {len(self.tokens)} {dtype} tokens, fewer "
                             f"than one sequence of {seq_len + 1}; lower --seq-len")

    def batch(self, step: int, rank: int, micro: int, batch_size: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(mix_seed(self.seed, "windows", step, rank,
                                                           micro))
        starts = torch.randint(0, len(self.tokens) - self.seq_len - 1, (batch_size,),
                               generator=generator).tolist()
        rows = np.stack([self.tokens[s:s + self.seq_len + 1] for s in starts]).astype(np.int64)
        top = int(rows.max())
        if top >= self.vocab_size:
            raise SystemExit(f"trainctl: {self.path} holds token id {top}, beyond the model's "
                             f"vocabulary of {self.vocab_size}; set --vocab-size or --token-dtype")
        return torch.from_numpy(rows).to(self.device, non_blocking=True)
