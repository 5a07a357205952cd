"""PyTorch DDP training of a timm ViT on GPUs (NCCL) or CPUs (gloo), preemption-proof.

Run it under torchrun, unchanged on SageMaker, on EC2 and locally:

    torchrun --standalone --nproc_per_node=8 train_ddp.py --batch-size 128 --steps 10000 \
        --checkpoint-dir /mnt/ckpt --checkpoint-every 500

Everything that is not CUDA/CPU-specific (arguments, data, checkpoints, signals, metrics, the
loop) is in trainctl_common.py beside this file, shared with train_neuron.py.
"""

from __future__ import annotations

import os
import signal
import sys

# A Spot notice can arrive while torch is still importing (seconds on a busy host): note it from
# the first line on instead of dying by the default SIGTERM action, and hand it over below.
_EARLY_SIGNALS: list = []
signal.signal(signal.SIGTERM, lambda signum, frame: _EARLY_SIGNALS.append(signum))

import torch  # noqa: E402  (after the early handler on purpose)
import torch.distributed as dist  # noqa: E402
import trainctl_common as common  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402


STOP = common.StopSignal().install((signal.SIGTERM,), early=_EARLY_SIGNALS)


class TorchDeviceOps(common.DeviceOps):
    """CUDA with NCCL, or CPU with gloo."""

    def __init__(self, device_kind: str) -> None:
        self.name = device_kind
        self.autocast_device_type = device_kind

    def setup(self, ctx: common.DistContext) -> None:
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

    def prepare_model(self, model: torch.nn.Module, args) -> torch.nn.Module:
        model = model.to(self.device)
        if dist.is_initialized():
            device_ids = [self.device.index] if self.name == "cuda" else None
            model = DistributedDataParallel(model, device_ids=device_ids)
        return model

    def random_stream(self, seed: int):
        generator = torch.Generator(device=self.device)
        generator.manual_seed(seed)
        device = self.device

        def draw(shape):
            return torch.randn(shape, generator=generator, device=device)
        return draw

    def rng_state(self):
        return torch.cuda.get_rng_state(self.device) if self.name == "cuda" else None

    def set_rng_state(self, state) -> None:
        if self.name == "cuda":
            torch.cuda.set_rng_state(state, self.device)

    def synchronize(self) -> None:
        if self.name == "cuda":
            torch.cuda.synchronize(self.device)


def main(argv=None) -> int:
    parser = common.build_parser(
        "Train a timm ViT with PyTorch DDP (trainctl entrypoint)", devices=("cuda", "xla", "cpu"))
    args = common.parse_args(parser, argv)
    device_kind = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device_kind == "xla":
        parser.error("--device xla is train_neuron.py's job (torch_xla); this script runs "
                     "cuda or cpu")
    if device_kind == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda but torch sees no GPU")
    if (device_kind == "cpu" and args.bf16 and os.environ.get("RANK", "0") == "0"
            and not torch.ops.mkldnn._is_mkldnn_bf16_supported()):
        # Measured on an AVX2-only EPYC: ViT-B/16 steps 30x slower than in fp32.
        common.warn("this CPU has no native bf16: autocast will be far slower than "
                    "--bf16 false")
    return common.run(args, TorchDeviceOps(device_kind), STOP)


if __name__ == "__main__":
    sys.exit(main())
