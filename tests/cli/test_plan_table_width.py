"""The plan table is readable at 80, 100 and 200 columns: columns are left out whole by importance (and the
table says which), never cut with an ellipsis, and no line is wider than the terminal."""
from __future__ import annotations

import pytest

from tests.support.helpers import CONFIGS, run_cli


@pytest.mark.parametrize("columns", [80, 100, 200])
@pytest.mark.parametrize("config", ["vit-base-g5.yaml", "llm-7b.yaml"])
def test_the_plan_table_fits_the_terminal(tmp_path, columns, config):
    proc = run_cli(["plan", str(CONFIGS / config), "--offline", "--top", "5"], tmp_path,
                   env={"COLUMNS": str(columns)})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "…" not in proc.stdout
    assert max(len(line) for line in lines) <= columns
    header = next(line for line in lines if "layout" in line and "expected $" in line)
    assert "expected $" in header and "hours" in header
    if columns >= 100:  # the rate that says whether the model understood the job, then the risk (issue 35)
        assert "samples/s" in header and "p90 $" in header
    if columns == 200:
        assert "samples/s" in header and "notes" in header
    else:
        assert any(line.strip().startswith("not shown at this width:") for line in lines)
