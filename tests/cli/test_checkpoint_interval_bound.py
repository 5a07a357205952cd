"""`checkpoint_interval_minutes` is bounded in the spec: 1e-300 made the Spot rework model fail with
`ValueError: lam value too large`; the spec now refuses it in one line, as it refuses a week and more."""
from __future__ import annotations

import pytest

from tests.support.helpers import CONFIGS, run_cli


@pytest.mark.parametrize("minutes", ["1e-300", "0.01", "20000"])
def test_an_absurd_checkpoint_interval_is_refused_in_one_line(tmp_path, minutes):
    spec = tmp_path / "job.yaml"
    spec.write_text((CONFIGS / "vit-base-g5.yaml").read_text().replace("checkpoint_interval_minutes: 20",
                                                                       f"checkpoint_interval_minutes: {minutes}"))
    proc = run_cli(["plan", str(spec), "--offline"], tmp_path / "home")
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "checkpoint_interval_minutes" in line and "Traceback" not in proc.stderr
