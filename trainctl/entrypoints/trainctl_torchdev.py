"""CUDA (NCCL) or CPU (gloo) device operations, shared by train_ddp.py and train_lm.py.

Each script subclasses ``TorchDeviceOps`` for how it wraps the model (DDP, FSDP).
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from trainctl_runtime import DeviceOps, DistContext, warn


class TorchDeviceOps(DeviceOps):
    """CUDA with NCCL, or CPU with gloo."""

    def __init__(self, device_kind: str, dist_backend: str = "auto") -> None:
        self.name = device_kind
        self.autocast_device_type = device_kind
        self.dist_backend = dist_backend

    def process_group_backend(self, ctx: DistContext) -> str:
        """gloo on CPUs, NCCL on GPUs, or SageMaker's data parallelism (smddp) when the launch chose it:
        importing smdistributed.dataparallel.torch.torch_smddp registers the "smddp" backend of
        torch.distributed (SageMaker Developer Guide, "Use the SMDDP library in your PyTorch training
        script"). It exists only in SageMaker's PyTorch images, on GPUs: elsewhere the job says so and
        runs on the usual backend instead of failing."""
        usual = "nccl" if self.name == "cuda" else "gloo"
        if self.dist_backend != "smddp":
            return usual
        if self.name == "cuda":
            try:
                import smdistributed.dataparallel.torch.torch_smddp  # noqa: F401
                return "smddp"
            except ImportError:
                reason = "smdistributed.dataparallel is not installed in this image"
        else:
            reason = "smddp runs on GPUs only"
        if ctx.is_main:
            warn(f"--dist-backend smddp: {reason}; using {usual}")
        return usual

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
            backend = self.process_group_backend(ctx)
            if self.name == "cuda":
                try:
                    # device_id binds NCCL to this GPU at once (torch >= 2.3); older images'
                    # torch does not know the argument and binds lazily instead.
                    dist.init_process_group(backend, device_id=self.device)
                except TypeError:
                    dist.init_process_group(backend)
            else:
                dist.init_process_group(backend)
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


def launched_gpus(env=None) -> int | None:
    """The GPUs the launch gave this node: SM_NUM_GPUS, the SageMaker training contract's variable (the toolkit
    counts `nvidia-smi --list-gpus`; trainctl's EC2 agent sets it the same way, bootstrap/sm_env.py), or None
    where no launch says (a run on a laptop)."""
    raw = (os.environ if env is None else env).get("SM_NUM_GPUS", "").strip()
    try:
        return int(raw) if raw else None
    except ValueError:
        raise SystemExit(f"trainctl: SM_NUM_GPUS={raw!r} is not a number of GPUs") from None


def pick_device(parser, requested: str | None) -> str:
    """--device, else the device the launch gave (SM_NUM_GPUS), else what is there.

    On a node launched with GPUs the script runs on them or fails in one line: falling back to the CPU
    there would bill the GPUs for hours of CPU training. A Neuron node (SM_NUM_NEURONS > 0) is
    train_neuron.py's."""
    if requested == "xla":
        parser.error("--device xla is train_neuron.py's job (torch_xla); this script runs cuda or cpu")
    gpus = launched_gpus()
    if requested is None and gpus is None:
        kind = "cuda" if torch.cuda.is_available() else "cpu"
    else:
        kind = requested or ("cuda" if gpus else "cpu")
    neurons = os.environ.get("SM_NUM_NEURONS", "0").strip()
    if requested is None and not gpus and neurons.isdigit() and int(neurons) > 0:
        raise SystemExit(f"trainctl: this node was launched with {neurons} NeuronCores and no GPU "
                         "(SM_NUM_NEURONS); train_neuron.py trains on Trainium, this script would use the CPU")
    if kind == "cuda" and not torch.cuda.is_available():
        given = f"this node was launched with {gpus} GPU(s) (SM_NUM_GPUS={gpus})" if gpus else "--device cuda"
        raise SystemExit(f"trainctl: {given} but torch {torch.__version__} sees none "
                         f"({cuda_says()}); it stops instead of training on the CPU")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if kind == "cuda" and local >= torch.cuda.device_count():
        raise SystemExit(f"trainctl: rank {local} of this node has no GPU: torch sees "
                         f"{torch.cuda.device_count()} (run at most that many processes per node)")
    return kind


def cuda_says() -> str:
    """Why torch has no GPU, in its own words: a CPU-only build, or CUDA's count."""
    if not torch.version.cuda:
        return "a CPU-only build"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    hidden = f", CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else ""
    return f"built for CUDA {torch.version.cuda}, device_count={torch.cuda.device_count()}{hidden}"
