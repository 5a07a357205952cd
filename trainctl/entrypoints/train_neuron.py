"""The same ViT training on AWS Trainium through torch_xla (torch-neuronx), preemption-proof.

Meant to run as, on a trn1.32xlarge (32 NeuronCores):

    torchrun --nproc_per_node=32 train_neuron.py --batch-size 32 --steps 10000 \
        --checkpoint-dir /mnt/ckpt --checkpoint-every 500 --stochastic-rounding true

Only what is XLA-specific is here: the XLA device, the xla process group, xm.optimizer_step
(which all-reduces gradients over the replicas, instead of a DDP wrapper), a graph cut after
every step, the device RNG and bf16 with optional stochastic rounding. Arguments, data,
checkpoints, signals, metrics and the loop are trainctl_common.py's, shared with train_ddp.py.

On a CPU, torch_xla runs it with PJRT_DEVICE=CPU in a single process (`make test-xla`).
"""

from __future__ import annotations

import os
import signal
import sys

# A Spot notice can arrive while torch and torch_xla are still importing: note it from the first
# line on instead of dying by the default SIGTERM action, and hand it over below.
_EARLY_SIGNALS: list = []
signal.signal(signal.SIGTERM, lambda signum, frame: _EARLY_SIGNALS.append(signum))

import torch  # noqa: E402  (after the early handler on purpose)
import torch.distributed as dist  # noqa: E402
import trainctl_common as common  # noqa: E402

STOP = common.StopSignal().install((signal.SIGTERM,), early=_EARLY_SIGNALS)


class XlaDeviceOps(common.DeviceOps):
    name = "xla"
    autocast_device_type = "xla"

    def __init__(self, pure_bf16: bool) -> None:
        # Imported here, after main() has set the Neuron runtime's environment.
        import torch_xla
        import torch_xla.core.xla_model as xm

        self.torch_xla, self.xm = torch_xla, xm
        self.pure_bf16 = pure_bf16
        # torch_xla >= 2.5 names these torch_xla.device()/torch_xla.sync(); the Neuron images
        # still ship older releases, where only the xm spellings exist.
        self._device_fn = getattr(torch_xla, "device", None) or xm.xla_device
        self._sync_fn = getattr(torch_xla, "sync", None) or xm.mark_step

    def setup(self, ctx: common.DistContext) -> None:
        self.device = self._device_fn()
        if ctx.distributed:
            import torch_xla.distributed.xla_backend  # noqa: F401  (registers the "xla" backend)

            dist.init_process_group("xla", init_method="xla://")
            ctx.make_control_group()

    def prepare_model(self, model: torch.nn.Module, args) -> torch.nn.Module:
        model = model.to(self.device)
        if self.pure_bf16:
            # Weights, gradients and Adam moments in bf16; stochastic rounding in the Neuron
            # runtime keeps small updates from being rounded away.
            model = model.to(torch.bfloat16)
        return model

    def optimizer_kwargs(self) -> dict:
        # capturable keeps Adam's step counter on the device; otherwise Adam reads it with
        # .item() every step, which forces the XLA graph to run mid-step.
        return {"capturable": True, "foreach": False}

    def optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        # All-reduces the gradients over every replica (mean), then optimizer.step().
        self.xm.optimizer_step(optimizer)

    def step_end(self) -> None:
        # Cut the lazy graph here: one compiled graph per training step, reused every step.
        self._sync_fn()

    def random_stream(self, seed: int):
        # XLA has no per-call generators: reseed the device RNG, then draw in order. The seed is
        # fed to the graph as data, so a new seed every step does not recompile.
        self.xm.set_rng_state(seed, self.device)
        device = self.device

        def draw(shape):
            return torch.randn(shape, device=device)
        return draw

    def rng_state(self):
        return int(self.xm.get_rng_state(self.device))

    def set_rng_state(self, state) -> None:
        self.xm.set_rng_state(int(state), self.device)

    def synchronize(self) -> None:
        self.xm.wait_device_ops()

    def finish(self, ctx: common.DistContext) -> None:
        # Recompilation is what makes XLA training slow: report how many graphs were compiled.
        import torch_xla.debug.metrics as met

        data = met.metric_data("CompileTime")
        if ctx.is_main:
            common.emit(f"xla compiles={data[0] if data else 0}")


def launched_neuron_check(env=None) -> None:
    """The device the launch gave, not a guess: SM_NUM_NEURONS (the SageMaker training contract's NeuronCore
    count; the toolkit counts `neuron-ls`, trainctl's EC2 agent sets it from the node's Neuron devices) > 0
    means the NeuronCores, so torch_xla must not run on the CPU (PJRT_DEVICE=CPU); 0 means a node without
    Neuron devices, where only an explicit PJRT_DEVICE=CPU (the CPU test, `make test-xla`) runs. Neither set:
    torch_xla's own choice."""
    env = os.environ if env is None else env
    raw = env.get("SM_NUM_NEURONS", "").strip()
    if not raw:
        return
    if not raw.isdigit():
        raise SystemExit(f"trainctl: SM_NUM_NEURONS={raw!r} is not a number of NeuronCores")
    pjrt = env.get("PJRT_DEVICE", "").strip().upper()
    if int(raw) > 0 and pjrt not in ("", "NEURON"):
        raise SystemExit(f"trainctl: this node was launched with {raw} NeuronCores (SM_NUM_NEURONS) but "
                         f"PJRT_DEVICE={pjrt}; it stops instead of training on that device (unset PJRT_DEVICE)")
    if int(raw) == 0 and pjrt != "CPU":
        gpus = env.get("SM_NUM_GPUS", "0")
        raise SystemExit(f"trainctl: this node was launched with no Neuron device (SM_NUM_NEURONS=0, "
                         f"SM_NUM_GPUS={gpus}); train_neuron.py trains on Trainium/Inferentia, train_ddp.py "
                         "on GPUs and CPUs")


def main(argv=None) -> int:
    parser = common.build_parser("Train a timm ViT on Trainium with torch_xla (trainctl "
                                 "entrypoint)", devices=("cuda", "xla", "cpu"))
    common.add_option(parser, "--stochastic-rounding", type=common.str2bool, default=False,
                      help="bf16 weights with NEURON_RT_STOCHASTIC_ROUNDING_EN=1 (true|false)")
    args = common.parse_args(parser, argv)
    if (args.device or "xla") != "xla":
        parser.error(f"--device {args.device} is train_ddp.py's job; this script runs xla")
    launched_neuron_check()
    if args.stochastic_rounding:
        # Read by the Neuron runtime when it starts, i.e. at the first device use below.
        os.environ["NEURON_RT_STOCHASTIC_ROUNDING_EN"] = "1"
        args.bf16 = True  # bf16 weights need bf16 inputs: autocast casts them
    return common.run(args, XlaDeviceOps(pure_bf16=args.stochastic_rounding), STOP)


if __name__ == "__main__":
    sys.exit(main())
