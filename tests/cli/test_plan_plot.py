"""`trainctl plan --plot`: expected cost against hours in plain characters that fit the terminal,
the Pareto front drawn as letters, axes labelled, and a legend that names every letter."""
from __future__ import annotations

import json
import re

import pytest

from tests.support.helpers import CONFIGS, run_cli
from trainctl.plans import Option
from trainctl.render.plot import plot_lines


@pytest.mark.parametrize("columns", [80, 100, 200])
def test_the_plot_fits_and_names_the_front(tmp_path, columns):
    spec = str(CONFIGS / "vit-base-g5.yaml")
    proc = run_cli(["plan", spec, "--offline", "--plot"], tmp_path, env={"COLUMNS": str(columns)})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    assert all(ord(ch) < 128 for ch in proc.stdout)  # plain characters, any terminal
    assert any(line.startswith("expected $") for line in lines)
    assert any("hours" in line and "interruption rework" in line for line in lines)
    plot_rows = [line.split("|", 1)[1] for line in lines if "|" in line]
    assert len(plot_rows) == 16
    letters = sorted(set("".join(re.findall(r"[A-Z]", "".join(plot_rows)))))
    legend = {m.group(1): m.group(2) for line in lines if (m := re.match(r"^([A-Z]) #(\d+) ", line))}
    assert letters == sorted(legend) and letters[0] == "A"

    doc = json.loads(run_cli(["-o", "json", "plan", spec, "--offline"], tmp_path).stdout)
    front = sorted((o for o in doc["options"] if o["pareto"]), key=lambda o: o["expected_cost_usd"])
    assert [int(legend[letter]) for letter in letters] == [o["rank"] for o in front][:len(letters)]
    # A is the cheapest option: drawn on the bottom row
    assert "A" in plot_rows[-1]


def _option(rank: int, cost: float, hours: float, pareto: bool) -> Option:
    return Option(rank=rank, platform="ec2", instance_type="g5.xlarge", count=rank, market="spot",
                  region="us-east-1", accelerators=rank, hourly_usd=cost / hours, throughput_samples_per_s=100,
                  throughput_source="model", hours=hours, expected_cost_usd=cost, pareto=pareto)


def test_front_points_in_one_cell_stay_apart_and_far_outliers_are_counted():
    options = [_option(1, 10.0, 10.0, True), _option(2, 10.01, 9.99, True), _option(3, 20.0, 5.0, True),
               _option(4, 15.0, 30.0, False), _option(5, 5000.0, 9000.0, False)]
    lines = plot_lines(options, width=60)
    body = "".join(line.split("|", 1)[1] for line in lines if "|" in line)
    assert sorted(re.findall(r"[A-Z]", body)) == ["A", "B", "C"]  # A and B share a cell: B moves beside it
    assert any(line.startswith("1 dearer or slower options not drawn") for line in lines)
    drawing = [line for line in lines if "|" in line or line.lstrip().startswith(("+", "hours"))]
    assert len(drawing) == 16 + 2 and max(len(line) for line in drawing) <= 60  # the legend is wrapped when printed
