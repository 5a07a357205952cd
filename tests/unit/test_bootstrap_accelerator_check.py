"""The node agent counts the node's devices as SageMaker's training toolkit does (`nvidia-smi --list-gpus`), fails a
node short of its type's accelerators, and tells the training what it counted (SM_NUM_GPUS/SM_NUM_NEURONS), never
the plan's process count. Real processes: a stand-in `nvidia-smi` on PATH, as a node's driver answers."""
from __future__ import annotations

import pytest

from tests.support.helpers import gpu_stand_in
from trainctl.bootstrap import accelerator_check, sm_env

G5 = {"accelerator": "gpu", "accelerator_count": 1, "instance_type": "g5.xlarge", "nproc_per_node": 1}


@pytest.fixture
def one_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{gpu_stand_in(tmp_path / 'bin', 1)}:/usr/bin:/bin")


def test_the_gpus_the_driver_lists_are_the_ones_the_training_is_told_of(one_gpu):
    said: list[str] = []
    assert accelerator_check.check(G5, said.append, env={}) == {"num_gpus": 1, "num_neurons": 0}
    assert said == ["trainctl-agent: 1 GPUs present, as g5.xlarge has (SM_NUM_GPUS=1)"]


def test_cuda_visible_devices_narrows_what_the_training_is_told_and_the_agent_says_so(one_gpu):
    said: list[str] = []
    assert accelerator_check.check(G5, said.append, env={"CUDA_VISIBLE_DEVICES": ""})["num_gpus"] == 0
    assert said == ["trainctl-agent: 1 GPUs present, as g5.xlarge has; CUDA_VISIBLE_DEVICES='' shows the training 0 "
                    "of them (SM_NUM_GPUS=0)"]


@pytest.mark.parametrize("value,shown", [("", 0), ("0", 1), ("0,1", 2), ("0,-1,2", 1), ("GPU-a,GPU-b", 2)])
def test_cuda_visible_devices_counts_as_cuda_reads_it(value, shown):
    assert accelerator_check.cuda_visible(4, {"CUDA_VISIBLE_DEVICES": value}) == shown
    assert accelerator_check.cuda_visible(1, {}) == 1


def test_a_node_short_of_its_gpus_fails_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{gpu_stand_in(tmp_path / 'bin', 1)}:/usr/bin:/bin")
    with pytest.raises(SystemExit) as stop:
        accelerator_check.check({**G5, "accelerator_count": 8, "instance_type": "p5.48xlarge"}, print, env={})
    assert str(stop.value).startswith("trainctl-agent: this node sees 1 of the 8 GPUs p5.48xlarge has;")


def test_a_cpu_node_tells_the_training_it_has_no_gpu_whatever_its_process_count(tmp_path, monkeypatch):
    """Before, SM_NUM_GPUS was the plan's processes per node: 2 on a 2-process CPU node, and a script taking its
    device from the launch would have looked for 2 GPUs."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi: an image without the NVIDIA driver
    cfg = {"instance_type": "c5.xlarge", "nproc_per_node": 2, "script": "train.py", "job_id": "j", "args": []}
    devices = accelerator_check.check(cfg, print, env={})
    env = sm_env.sm_variables(cfg, str(tmp_path / "ml"), 0, 1, {}, "c5.xlarge", "eth0", devices)
    assert (env["SM_NUM_GPUS"], env["SM_NUM_NEURONS"]) == ("0", "0")
