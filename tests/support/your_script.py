"""The example script of docs/your-script.md, taken out of the doc, and a host's /opt/ml to run it in (its own
mount namespace: private_mounts.py): shared by the doc's test and the script-contract suite."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.helpers import ROOT
from trainctl_sandbox.server import private_mounts

DOC = ROOT / "docs" / "your-script.md"
HEADING = "### An example that follows the contract"


def doc_script() -> str:
    """The first ```python block after the example's heading."""
    text = DOC.read_text()
    section = text[text.index(HEADING):]
    return section.split("```python\n", 1)[1].split("\n```", 1)[0] + "\n"


def doc_host(tmp_path: Path, name: str) -> Path:
    """A host's /opt/ml: the code, and the `train` channel with 12 numbers in two files."""
    ml = tmp_path / name
    (ml / "code").mkdir(parents=True)
    (ml / "code" / "train.py").write_text(doc_script())
    channel = ml / "input" / "data" / "train"
    channel.mkdir(parents=True)
    (channel / "part-0.txt").write_text("".join(f"{i}\n" for i in range(6)))
    (channel / "part-1.txt").write_text("".join(f"{i}\n" for i in range(6, 12)))
    return ml


def start_doc_script(ml: Path, *args: str) -> subprocess.Popen:
    env = {"PATH": "/usr/bin:/bin", "SM_CHANNEL_TRAIN": "/opt/ml/input/data/train", "SM_MODEL_DIR": "/opt/ml/model",
           "PYTHONUNBUFFERED": "1"}
    cmd = private_mounts.wrap([sys.executable, "train.py", *args], {"/opt/ml": str(ml)}, "/opt/ml/code")
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
