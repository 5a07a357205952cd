"""CUDA (NCCL) or CPU (gloo) device operations, shared by train_ddp.py and train_lm.py.

Each script subclasses ``TorchDeviceOps`` for how it wraps the model (DDP, FSDP).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from trainctl_runtime import DeviceOps, DistContext


class TorchDeviceOps(DeviceOps):
    """CUDA with NCCL, or CPU with gloo."""

    def __init__(self, device_kind: str) -> None:
        self.name = device_kind
        self.autocast_device_type = device_kind

    def setup(self, ctx: DistContext) -> None:
        if self.name == "cuda":
            torch.cuda.set_device(ctx.local_rank)
            self.device = torch.device("cuda", ctx.local_rank)
            # bf16 autocast covers the matmuls; TF32 speeds up whatever stays in fp32.
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        else:
            self.device = torch.device("cpu")
        if ctx.distributed:
            if self.name == "cuda":
                try:
                    # device_id binds NCCL to this GPU at once (torch >= 2.3); older images'
                    # torch does not know the argument and binds lazily instead.
                    dist.init_process_group("nccl", device_id=self.device)
                except TypeError:
                    dist.init_process_group("nccl")
            else:
                dist.init_process_group("gloo")
            ctx.make_control_group()

    def random_stream(self, seed: int):
        generator = torch.Generator(device=self.device)
        generator.manual_seed(seed)
        device = self.device

        def draw(shape):
            return torch.randn(shape, generator=generator, device=device)
        return draw

    def generator(self, seed: int) -> torch.Generator:
        """A device generator seeded with ``seed`` (for integer draws, e.g. tokens)."""
        generator = torch.Generator(device=self.device)
        generator.manual_seed(seed)
        return generator

    def rng_state(self):
        return torch.cuda.get_rng_state(self.device) if self.name == "cuda" else None

    def set_rng_state(self, state) -> None:
        if self.name == "cuda":
            torch.cuda.set_rng_state(state, self.device)

    def synchronize(self) -> None:
        if self.name == "cuda":
            torch.cuda.synchronize(self.device)


def pick_device(parser, requested: str | None) -> str:
    """--device, or what is there; a parser error for a GPU that is not."""
    kind = requested or ("cuda" if torch.cuda.is_available() else "cpu")
    if kind == "xla":
        parser.error("--device xla is train_neuron.py's job (torch_xla); this script runs "
                     "cuda or cpu")
    if kind == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda but torch sees no GPU")
    return kind
