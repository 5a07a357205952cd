"""train_neuron.py through torch_xla on the CPU (PJRT_DEVICE=CPU), one process.

Opt-in (`make test-xla` = scripts/test_xla.sh): needs torch 2.9.0 + torch-xla 2.9.0, which the
script installs into .xla-venv/. Multi-process XLA collectives do not work on the CPU client
(pytorch/xla#5005), so this covers the XLA device path of one replica; the shared code is
covered by the main suite with real 2-rank torchrun runs.
"""

from __future__ import annotations

import re
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from entrypoint_helpers import (  # noqa: E402
    ENTRYPOINTS, METRIC_RE, RESUME_RE, STOPPED_RE, checkpoint_steps, clean_env, final_hash,
    run_to_end, start, wait_until,
)

pytest.importorskip("torch_xla")
TRAIN_NEURON = ENTRYPOINTS / "train_neuron.py"
STEPS = 30
ARGS = ["--model", "vit_micro", "--batch-size", "8", "--steps", str(STEPS), "--lr", "1e-3",
        "--seed", "2", "--log-every", "10", "--checkpoint-every", "10", "--keep", "2"]
COMPILES_RE = re.compile(r"^trainctl xla compiles=(\d+)$", re.M)


def env():
    return clean_env(PJRT_DEVICE="CPU")


def neuron(checkpoint_dir, *extra: str) -> list[str]:
    return [sys.executable, str(TRAIN_NEURON), *ARGS, "--checkpoint-dir", str(checkpoint_dir),
            *extra]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("xla-reference")
    code, text = run_to_end(neuron(root / "ckpt"), root / "log.txt", env=env())
    assert code == 0, text[-4000:]
    return {"text": text, "dir": root / "ckpt", "hash": final_hash(text)}


def test_xla_run_learns_and_compiles_the_step_once(reference):
    text = reference["text"]
    assert "trainctl start device=xla world_size=1" in text
    losses = [float(loss) for _, loss, _ in METRIC_RE.findall(text)]
    assert len(losses) == STEPS // 10 and losses[-1] < 0.8 * losses[0], losses
    # A graph per distinct shape of work (the step, the loss read-out, ...), not one per step:
    # a new seed or learning rate every step must not recompile.
    compiles = int(COMPILES_RE.findall(text)[0])
    assert 0 < compiles <= 6, compiles
    assert checkpoint_steps(reference["dir"]) == [20, 30]


def test_xla_sigterm_checkpoints_exits_0_and_the_rerun_matches(reference, tmp_path):
    ckpt = tmp_path / "ckpt"
    job = start(neuron(ckpt), tmp_path / "term.txt", env=env())
    wait_until(lambda: "trainctl step=10 " in job.text(), "step 10", job)
    job.proc.send_signal(signal.SIGTERM)
    assert job.wait() == 0, job.text()[-4000:]
    stopped = STOPPED_RE.findall(job.text())
    assert len(stopped) == 1 and stopped[0][2] == "SIGTERM"
    step = int(stopped[0][1])
    assert step in checkpoint_steps(ckpt)

    code, text = run_to_end(neuron(ckpt), tmp_path / "rerun.txt", env=env())
    assert code == 0, text[-4000:]
    assert RESUME_RE.findall(text) == [str(step)]
    assert final_hash(text) == reference["hash"]


def test_stochastic_rounding_trains_bf16_weights(tmp_path):
    import torch

    ckpt = tmp_path / "ckpt"
    code, text = run_to_end(
        [sys.executable, str(TRAIN_NEURON), "--model", "vit_micro", "--batch-size", "4",
         "--steps", "3", "--log-every", "3", "--checkpoint-dir", str(ckpt),
         "--stochastic_rounding", "true"],
        tmp_path / "log.txt", env=env())
    assert code == 0, text[-4000:]
    final_hash(text)
    saved = torch.load(next(ckpt.glob("ckpt-0000000003-*.pt")), weights_only=True)
    assert saved["model"]["head.weight"].dtype == torch.bfloat16
