"""PyTorch DDP training of a timm ViT on GPUs (NCCL) or CPUs (gloo), preemption-proof.

Run it under torchrun, unchanged on SageMaker, on EC2 and locally:

    torchrun --standalone --nproc_per_node=8 train_ddp.py --batch-size 128 --steps 10000 \
        --checkpoint-dir /mnt/ckpt --checkpoint-every 500

Everything that is not DDP-specific (arguments, data, checkpoints, signals, metrics, the loop,
the CUDA/CPU device) is in the trainctl_*.py modules beside this file, shared with
train_neuron.py and train_lm.py.
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
from trainctl_torchdev import TorchDeviceOps, pick_device  # noqa: E402


STOP = common.StopSignal().install((signal.SIGTERM,), early=_EARLY_SIGNALS)


class DdpDeviceOps(TorchDeviceOps):
    """CUDA with NCCL, or CPU with gloo; the model replicated with DistributedDataParallel."""

    def prepare_model(self, model: torch.nn.Module, args) -> torch.nn.Module:
        model = model.to(self.device)
        if dist.is_initialized():
            device_ids = [self.device.index] if self.name == "cuda" else None
            model = DistributedDataParallel(model, device_ids=device_ids)
        return model


def main(argv=None) -> int:
    parser = common.build_parser(
        "Train a timm ViT with PyTorch DDP (trainctl entrypoint)", devices=("cuda", "xla", "cpu"))
    args = common.parse_args(parser, argv)
    device_kind = pick_device(parser, args.device)
    if (device_kind == "cpu" and args.bf16 and os.environ.get("RANK", "0") == "0"
            and not torch.ops.mkldnn._is_mkldnn_bf16_supported()):
        # Measured on an AVX2-only EPYC: ViT-B/16 steps 30x slower than in fp32.
        common.warn("this CPU has no native bf16: autocast will be far slower than "
                    "--bf16 false")
    return common.run(args, DdpDeviceOps(device_kind, args.dist_backend), STOP)


if __name__ == "__main__":
    sys.exit(main())
