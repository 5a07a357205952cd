"""Pure: the fixed time of each launch (and each restart), and which part of it the platform bills.

SageMaker bills a training job from TrainingStartTime to TrainingEndTime; the DescribeTrainingJob reference
says the start time is when the job "starts on training instances" and that the container log starts later
"due to the time it takes to download the training data and to the size of the training container": the
Starting (provisioning) phase is not billed, Downloading (image and data) and Uploading are.
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeTrainingJob.html (TrainingStartTime,
TrainingEndTime, BillableTimeInSeconds). Managed Spot bills neither the wait for capacity nor the
interrupted time: BillableTimeInSeconds counts the time the instances ran.
EC2 bills Linux instances per second from the running state (60 s minimum), so boot, the node agent's code
download and torchrun's start are billed; the fleet request before it is not.
https://aws.amazon.com/ec2/pricing/on-demand/ ("Per Second Billing").

The durations are ASSUMED (no published figure for these images): they are the plan's stated guesses, shown in
its words, and a sensitivity case doubles them (docs/cost-model.md, "Fixed costs per launch").
"""
from __future__ import annotations

from dataclasses import dataclass

from trainctl.catalog.platforms import PLATFORMS

# minutes: (not billed, billed) per platform, and why: each backend's platform.toml (catalog/platforms.py reads them)
START_MINUTES = {p.name: p.start_minutes for p in PLATFORMS.values()}
# Neuron compiles each new graph on the first steps; the bundled neuron entrypoint keeps no persistent
# compile cache across instances, so every start and restart compiles again (ASSUMED 15 min for a ViT-B
# sized graph; the Neuron docs only say compilation "can result in long compile times").
# https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-features/neuron-caching.html
NEURON_COMPILE_MINUTES = 15.0


@dataclass(frozen=True)
class StartCost:
    unbilled_hours: float   # wall time before billing starts
    billed_hours: float     # billed on every node before the first step

    @property
    def wall_hours(self) -> float:
        return self.unbilled_hours + self.billed_hours


def start_cost(platform: str, accelerator_kind: str, scale: float = 1.0) -> StartCost:
    """Fixed cost of one launch on `platform` (scale: a sensitivity factor on the assumed durations)."""
    unbilled, billed = START_MINUTES[platform]
    if accelerator_kind == "neuron":
        billed += NEURON_COMPILE_MINUTES
    return StartCost(unbilled * scale / 60.0, billed * scale / 60.0)


def restart_billed_hours(restart_minutes: float, accelerator_kind: str, scale: float = 1.0) -> float:
    """Billed time on every node from capacity back to training again after an interruption: the spec's
    restart_minutes (default 10: start-up, image, checkpoint load), plus the Neuron recompile."""
    minutes = restart_minutes + (NEURON_COMPILE_MINUTES if accelerator_kind == "neuron" else 0.0)
    return minutes * scale / 60.0
