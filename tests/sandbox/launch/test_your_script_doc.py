"""The example script of docs/your-script.md, taken from the doc itself and run the way a platform runs it: its
own /opt/ml (a mount namespace, as the sandbox gives each host), SM_CHANNEL_TRAIN and SM_MODEL_DIR, exactly its
arguments, SIGTERM mid-run. It checkpoints, resumes where it stopped and ends with the model an uninterrupted run
writes; a flag it does not know is refused, as the contract promises nobody passes one."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.your_script import doc_host as _host, doc_script, start_doc_script as _start
from trainctl_sandbox.server import private_mounts

pytestmark = pytest.mark.skipif(private_mounts.unavailable() is not None,
                                reason=f"needs a private /opt/ml: {private_mounts.unavailable()}")


def test_the_doc_example_checkpoints_on_sigterm_resumes_and_ends_as_an_uninterrupted_run(tmp_path):
    ml = _host(tmp_path, "interrupted")
    proc = _start(ml, "--epochs", "30", "--work-seconds", "0.2", "--verbose", "True")
    for line in proc.stdout:
        if line.startswith("trainctl step=2 "):
            break
    proc.terminate()  # SIGTERM, as a Spot notice brings it
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    stopped = json.loads((ml / "checkpoints" / "progress.json").read_text())["epoch"]
    assert 2 <= stopped < 30 and f"SIGTERM: checkpointed epoch {stopped}" in out
    snapshots = sorted(p.name for p in (ml / "checkpoints" / "epochs").iterdir())
    assert snapshots == [f"epoch-{e:04d}.json" for e in range(1, stopped + 1)]  # the sub-folder, no temporary file
    assert not (ml / "model").exists()

    again = _start(ml, "--epochs", "30", "--verbose", "True")
    out, err = again.communicate(timeout=60)
    assert again.returncode == 0, err
    assert out.startswith(f"resumed at epoch {stopped}\n") and "trainctl step=30 " in out
    assert f"trainctl step={stopped} " not in out  # no epoch trained twice
    model = json.loads((ml / "model" / "model.json").read_text())

    whole = _host(tmp_path, "uninterrupted")
    once = _start(whole, "--epochs", "30")
    assert once.communicate(timeout=60)[0].count("trainctl step=") == 30 and once.returncode == 0
    assert model == json.loads((whole / "model" / "model.json").read_text())
    assert not list(tmp_path.rglob("*.tmp"))


def test_the_doc_example_refuses_a_flag_it_does_not_know(tmp_path):
    proc = _start(_host(tmp_path, "host"), "--epochs", "1", "--checkpoint-dir", "/somewhere")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "unrecognized arguments: --checkpoint-dir /somewhere" in err
