"""Token batches for train_lm.py: synthetic sequences generated on the device, or windows of
pre-tokenized shards (.bin or .npy of uint16 or uint32 ids, e.g. the `train` channel).

Both are pure functions of (seed, step, chunk of the step's global batch): any batch can be
regenerated exactly, whichever rank and however many ranks take it, which is what makes a resumed
run identical to an uninterrupted one (trainctl_elastic.py).
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

    def batch(self, step: int, chunk: int, batch_size: int) -> torch.Tensor:
        """Chunk `chunk` of optimizer step `step` (trainctl_elastic.py), whichever rank takes it: (batch,
        seq_len + 1) int64 tokens, inputs [:, :-1], targets [:, 1:]."""
        generator = self.ops.generator(mix_seed(self.seed, "tokens", step, chunk))
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
    """Windows of seq_len + 1 tokens from one or more token shards, memory-mapped: the OS pages in what is read.

    The windows form one endless stream: sample n is a window drawn uniformly over every shard's valid starts (a
    window lies within one shard) by a generator seeded by (seed, n // BLOCK), so it is a pure function of n. Each
    optimizer step takes the stream's next samples, global batch of them, every rank its own slice: the position in
    the data is the number of samples taken (`read`), and every checkpoint carries it with the files it indexes. A
    resume continues at that very sample, whatever the ranks, micro-batches or batch size of the resumed run; one on
    other files or another sequence length is refused. On a sharded channel (each host holds only its share of the
    files) the stream is the host's: its files, split among its ranks (LOCAL_RANK of LOCAL_WORLD_SIZE), seeded by
    the host index too; the position is then per host, and exact when the host holds the same files again."""

    BLOCK = 4096   # samples drawn per generator: one seeding per 4096 windows, not per window

    def __init__(self, paths: list[str], dtype: str, seed: int, vocab_size: int, seq_len: int,
                 device: torch.device, ctx, step_samples: int, sharded: bool = False) -> None:
        self.shards = [_open_tokens(path, dtype) for path in paths]
        self.paths, self.seed, self.vocab_size = paths, seed, vocab_size
        self.seq_len, self.device = seq_len, device
        self.starts = np.cumsum([0] + [max(0, len(t) - seq_len - 1) for t in self.shards])
        if self.starts[-1] <= 0:
            raise SystemExit(f"trainctl: {', '.join(paths[:3])}: no shard holds one sequence of {seq_len + 1} "
                             "tokens; lower --seq-len")
        self.ctx, self.host = ctx, (ctx.rank // ctx.local_world_size if sharded else None)
        self.per_step = step_samples   # samples of one step: the global batch (a host's share of it when sharded)
        self.start_step = self.start_read = self.rows_read = 0
        self._block: tuple[int, list[int]] = (-1, [])

    @property
    def kind(self) -> str:
        host = f", host {self.host}'s shard" if self.host is not None else ""
        return f"{len(self.shards)} token shard{'s' if len(self.shards) > 1 else ''}{host}"

    def files(self) -> list[list]:
        return [[os.path.basename(path), len(tokens)] for path, tokens in zip(self.paths, self.shards)]

    def read_at(self, step: int) -> int:
        """Samples of the stream taken before optimizer step `step`."""
        return self.start_read + (step - self.start_step) * self.per_step

    def position(self, step: int) -> dict:
        """What a checkpoint of `step` records: where the stream stands and what it is drawn from."""
        return {"read": self.read_at(step), "host": self.host, "files": self.files(), "seq_len": self.seq_len}

    def start(self, step: int, saved: list[dict] | None) -> None:
        """Collective. Where this run starts: the checkpoint's position (`saved`: every rank's, as saved), else
        step x samples per step (a fresh run, or a checkpoint from before positions were saved)."""
        self.start_step, self.start_read = step, step * self.per_step
        if not saved:
            return
        mine = next((entry for entry in saved if entry.get("host") == self.host), None)
        problem = resume_problem(mine, self.position(step), self.paths)
        if not self.ctx.all_true(problem is None):
            raise SystemExit(problem or "trainctl: another rank's data differs from the checkpoint's (see its line)")
        self.start_read = mine["read"]

    def _picks(self, first: int, count: int) -> list[int]:
        picks: list[int] = []
        while count > 0:
            block, offset = divmod(first, self.BLOCK)
            if self._block[0] != block:
                key = (self.seed, "windows", block) if self.host is None else (self.seed, "windows", self.host, block)
                generator = torch.Generator().manual_seed(mix_seed(*key))
                self._block = (block, torch.randint(0, int(self.starts[-1]), (self.BLOCK,),
                                                    generator=generator).tolist())
            take = min(self.BLOCK - offset, count)
            picks += self._block[1][offset:offset + take]
            first, count = first + take, count - take
        return picks

    def rows(self, first: int, count: int) -> torch.Tensor:
        """Samples first .. first + count - 1 of the stream, (count, seq_len + 1) int64 on the device."""
        rows = []
        for pick in self._picks(first, count):
            shard = int(np.searchsorted(self.starts, pick, side="right")) - 1
            start = pick - int(self.starts[shard])
            rows.append(self.shards[shard][start:start + self.seq_len + 1])
        rows = np.stack(rows).astype(np.int64)
        top = int(rows.max())
        if top >= self.vocab_size:
            raise SystemExit(f"trainctl: {self.paths[0]} holds token id {top}, beyond the model's "
                             f"vocabulary of {self.vocab_size}; set --vocab-size or --token-dtype")
        self.rows_read += count
        return torch.from_numpy(rows).to(self.device, non_blocking=True)

    def batch(self, step: int, chunk: int, batch_size: int) -> torch.Tensor:
        """Chunk `chunk` of optimizer step `step` (trainctl_elastic.py): the step's samples from its chunk x
        batch size on, whichever rank takes it."""
        return self.rows(self.read_at(step) + chunk * batch_size, batch_size)


def resume_problem(saved: dict | None, now: dict, paths: list[str]) -> str | None:
    """One line when the checkpoint's position does not apply to this run's data, else None."""
    where = f"host {now['host']}'s shard of " if now["host"] is not None else ""
    if saved is None:
        return (f"trainctl: the checkpoint holds no data position for host {now['host']}: it was written with "
                "another number of hosts or without a sharded channel; resume with the same layout and data")
    if saved.get("seq_len") != now["seq_len"]:
        return (f"trainctl: the checkpoint's windows are {saved.get('seq_len')} tokens long, this run's "
                f"{now['seq_len']}: resume with --seq-len {saved.get('seq_len')}, or start in a new --checkpoint-dir")
    if saved.get("files") != now["files"]:
        def show(files):
            return f"{len(files)} files, {sum(n for _, n in files)} tokens"
        return (f"trainctl: {where}{os.path.dirname(paths[0])} is not the data the checkpoint was reading "
                f"({show(now['files'])} now, {show(saved.get('files') or [])} then): its position does not apply; "
                "resume on the same files, or start in a new --checkpoint-dir")
    return None
