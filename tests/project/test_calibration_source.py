"""trainctl/catalog/calibration.json is written by scripts/catalog_sources/calibration_rows.py and nothing else: the
script, run as a maintainer runs it, writes the shipped file byte for byte. An edit made to the JSON alone would be
lost the next time someone re-runs the script, so it fails here: edit the script (or the modules beside it), run it,
then `python scripts/eval_model.py`."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "catalog_sources" / "calibration_rows.py"
SHIPPED = ROOT / "trainctl" / "catalog" / "calibration.json"


def drifted(written: dict, shipped: dict) -> list[str]:
    """Where two calibration documents differ: top-level keys, and row ids for the row lists."""
    out = [k for k in sorted(set(written) | set(shipped)) if k not in ("rows", "check_rows")
           and written.get(k) != shipped.get(k)]
    for key in ("rows", "check_rows"):
        mine = {r["id"]: r for r in written.get(key, [])}
        theirs = {r["id"]: r for r in shipped.get(key, [])}
        out += [f"{key}[{i}]" for i in sorted(set(mine) | set(theirs)) if mine.get(i) != theirs.get(i)]
    return out or ["key order or formatting"]


def test_the_generator_writes_the_shipped_calibration_byte_for_byte(tmp_path):
    out = tmp_path / "calibration.json"
    done = subprocess.run([sys.executable, str(SCRIPT), str(out)], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    written, shipped = out.read_bytes(), SHIPPED.read_bytes()
    assert written == shipped, (
        "trainctl/catalog/calibration.json is not what scripts/catalog_sources/calibration_rows.py writes; differs "
        f"at: {', '.join(drifted(json.loads(written), json.loads(shipped))[:12])}. Put the change in the script, run "
        "it, then python scripts/eval_model.py")
