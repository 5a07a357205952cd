"""The bundled scripts take their device from the launch, not from a guess (entrypoints/trainctl_torchdev.py
`pick_device`, train_neuron.py `launched_neuron_check`): SM_NUM_GPUS, the SageMaker training contract's count of
the node's GPUs (the toolkit's, and trainctl's EC2 agent's), > 0 means CUDA or a one-line failure; 0 means the CPU.
Before, a node launched with GPUs whose torch saw none trained on the CPU until its budget ended it.
Real processes, as a node's torchrun starts them; this machine has no GPU."""
from __future__ import annotations

import sys

import pytest

from tests.support.entrypoint_helpers import ENTRYPOINTS, TRAIN_DDP, TRAIN_LM, clean_env, run_to_end

VIT = ["--model", "vit_micro", "--batch-size", "4", "--steps", "2", "--log-every", "1", "--data-workers", "0",
       "--bf16", "false"]
LM = ["--preset", "tiny", "--batch-size", "2", "--steps", "2", "--log-every", "1"]


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("trainctl: ")]


@pytest.mark.parametrize("script,args", [(TRAIN_DDP, VIT), (TRAIN_LM, LM)], ids=["ddp", "lm"])
def test_a_node_launched_with_a_gpu_that_torch_cannot_see_fails_in_one_line(tmp_path, script, args):
    code, text = run_to_end([sys.executable, str(script), *args], tmp_path / "log.txt",
                            env=clean_env(SM_NUM_GPUS="1", SM_NUM_NEURONS="0", CUDA_VISIBLE_DEVICES=""))
    assert code != 0, text[-3000:]
    assert "trainctl step=" not in text and "Traceback" not in text, text[-3000:]
    [line] = error_lines(text)
    assert line.startswith("trainctl: this node was launched with 1 GPU(s) (SM_NUM_GPUS=1) but torch ") \
        and "sees none" in line and "instead of training on the CPU" in line, line


def test_a_node_launched_without_gpus_trains_on_the_cpu(tmp_path):
    code, text = run_to_end([sys.executable, str(TRAIN_DDP), *VIT], tmp_path / "log.txt",
                            env=clean_env(SM_NUM_GPUS="0", SM_NUM_NEURONS="0"))
    assert code == 0, text[-3000:]
    assert "trainctl start device=cpu " in text and "trainctl step=2 " in text, text[-3000:]


def test_a_neuron_node_refuses_the_gpu_script_and_a_gpu_node_the_neuron_script(tmp_path):
    code, text = run_to_end([sys.executable, str(TRAIN_DDP), *VIT], tmp_path / "ddp.txt",
                            env=clean_env(SM_NUM_GPUS="0", SM_NUM_NEURONS="32"))
    assert code != 0 and error_lines(text) == [
        "trainctl: this node was launched with 32 NeuronCores and no GPU (SM_NUM_NEURONS); train_neuron.py trains "
        "on Trainium, this script would use the CPU"], text[-3000:]
    # train_neuron.py decides before torch_xla is imported (this machine has none)
    code, text = run_to_end([sys.executable, str(ENTRYPOINTS / "train_neuron.py"), *VIT], tmp_path / "xla.txt",
                            env=clean_env(SM_NUM_GPUS="1", SM_NUM_NEURONS="0"))
    assert code != 0 and "torch_xla" not in text and error_lines(text) == [
        "trainctl: this node was launched with no Neuron device (SM_NUM_NEURONS=0, SM_NUM_GPUS=1); train_neuron.py "
        "trains on Trainium/Inferentia, train_ddp.py on GPUs and CPUs"], text[-3000:]
