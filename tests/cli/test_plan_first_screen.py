"""The plan fits a newcomer's first screen (issue 35): at 100 columns the table comes within the first 15 lines, with
samples/s, and the whole plan fits 50 lines unless --explain (-v) asks for every why; the warnings come after the
table, condensed; at 80 columns the footnote explains only the columns shown; a tiny job's plan carries no
amounts that round to nothing. `-o json` keeps every word (scripts read it)."""
from __future__ import annotations

import json
import re

import pytest

from tests.support.helpers import CONFIGS, run_cli

REFERENCE = sorted(p.name for p in CONFIGS.glob("*.yaml"))
# A user's own small CNN with a small budget: every option costs cents, most layouts are over budget.
TINY = ("name: small-cnn\nentrypoint: {script: train.py, source_dir: .}\n"
        "model: {params: 1200000, flops_per_sample: 40000000}\n"
        "workload: {samples: 50000, batch_size_per_accelerator: 64}\n"
        "candidates: {families: [g5, g6], nodes: {min: 1, max: 2}, regions: [us-east-1]}\n"
        "constraints: {budget_usd: 0.05}\n")
NOISE = ("$0.00 less than the next layout", "0.00 h faster", "$0.00 more than #1", "the advisor alone says",
         "$0 expected > $0", "0.0% lead")


def _tiny(tmp_path, budget: str = "0.05") -> str:
    (tmp_path / "train.py").write_text("print('train')\n")
    spec = tmp_path / "small-cnn.yaml"
    spec.write_text(TINY.replace("budget_usd: 0.05", f"budget_usd: {budget}"))
    return str(spec)


def _plan(tmp_path, spec: str, columns: int, *flags: str) -> list[str]:
    proc = run_cli(["plan", spec, "--offline", *flags], tmp_path, env={"COLUMNS": str(columns)})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    return lines


def _first_screen(lines: list[str]) -> None:
    top = next(i for i, line in enumerate(lines) if line.startswith("┏"))
    assert top < 15, "\n".join(lines[:top])
    header = " ".join(lines[top:top + 4])
    assert "samples/s" in header and "expected $" in header
    assert len(lines) <= 50, len(lines)
    # the warnings come after the table, never before it
    assert not any(line.startswith("warning:") for line in lines[:top])
    text = " ".join(" ".join(lines).split())
    assert "--explain for why each ranks where it does" in text


@pytest.mark.parametrize("config", REFERENCE)
def test_the_reference_plans_fit_a_first_screen_at_100_columns(tmp_path, config):
    _first_screen(_plan(tmp_path, str(CONFIGS / config), 100))


def test_a_tiny_jobs_plan_fits_a_first_screen_without_noise(tmp_path):
    spec = _tiny(tmp_path)
    lines = _plan(tmp_path, spec, 100)
    _first_screen(lines)
    explained = "\n".join(_plan(tmp_path, spec, 100, "--explain", "--show-excluded"))
    assert not [n for n in NOISE if n in explained], explained
    assert "over budget: $0.25 expected > $0.05" in " ".join(explained.split())
    # `-v` is --explain: every shown option's why, which is more than a screen
    verbose = _plan(tmp_path, spec, 100, "-v")
    assert len(verbose) > 50 and sum(line.startswith("#") for line in verbose) == 9
    # the JSON document keeps the planner's words
    doc = json.loads(run_cli(["-o", "json", "plan", spec, "--offline"], tmp_path).stdout)
    assert any("the advisor alone says" in w for w in doc["options"][0]["why"])


def test_at_80_columns_the_footnote_explains_only_the_columns_shown(tmp_path):
    lines = _plan(tmp_path, str(CONFIGS / "llm-7b.yaml"), 80)
    top = next(i for i, line in enumerate(lines) if line.startswith("┏"))
    header = " ".join(lines[top:top + 4])
    text = " ".join(" ".join(lines).split())
    assert "billed" not in header and "$/h" not in header
    assert "billed hours: what each node is paid for" not in text and "$/h: the whole layout" not in text
    assert "wall hours: from launch to the last step" in text
    wide = " ".join(" ".join(_plan(tmp_path, str(CONFIGS / "llm-7b.yaml"), 200)).split())
    assert "billed hours: what each node is paid for" in wide and "$/h: the whole layout" in wide


def test_a_budget_under_a_cent_is_not_read_as_nothing(tmp_path):
    """Every layout over a $0.004 budget: the grouped reasons say the budget, not "$0.25 expected > $0.00"."""
    proc = run_cli(["plan", _tiny(tmp_path, "0.004"), "--offline"], tmp_path, env={"COLUMNS": "100"})
    assert proc.returncode == 3, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "over budget: $0.25 expected > $0.004" in text and not re.search(r"> \$0\.00(?!\d)", text), proc.stdout
