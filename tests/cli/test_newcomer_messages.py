"""Messages that point to the fix, through the CLI: a did-you-mean for a family or type typed in the wrong case or
cut short, every problem of a spec or saved plan named (not "and 1 more problem"), and singular nouns for one."""
from __future__ import annotations

import json

import pytest

from tests.support.helpers import CONFIGS, run_cli

G5 = CONFIGS / "vit-base-g5.yaml"


def _spec(tmp_path, old: str, new: str) -> str:
    text = G5.read_text()
    assert old in text
    path = tmp_path / "spec.yaml"
    path.write_text(text.replace(old, new))
    return str(path)


@pytest.mark.parametrize(("typed", "meant"), [("G5", "g5"), ("p4", "p4d"), ("TRN1", "trn1")])
def test_an_unknown_family_gets_a_did_you_mean(tmp_path, typed, meant):
    proc = run_cli(["plan", _spec(tmp_path, "families: [g5]", f"families: [{typed}]"), "--offline"], tmp_path)
    assert proc.returncode == 2
    assert f"unknown instance family '{typed}'; did you mean '{meant}'?" in proc.stderr


@pytest.mark.parametrize(("typed", "meant"), [("G5.xlarge:1", "'g5.xlarge:1'"), ("p4.24xlarge:1", "'p4d.24xlarge'")])
def test_an_unknown_layout_gets_a_did_you_mean(tmp_path, typed, meant):
    proc = run_cli(["plan", str(G5), "--offline", "--layout", typed], tmp_path)
    assert proc.returncode == 2 and f"did you mean {meant}" in proc.stderr, proc.stderr


def test_every_problem_of_a_spec_is_named(tmp_path):
    spec = _spec(tmp_path, "precision: bf16", "precision: bf17")
    text = open(spec).read().replace("epochs: 10", "epochs: -1")
    open(spec, "w").write(text)
    proc = run_cli(["plan", spec, "--offline"], tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1
    assert "field 'model.precision'" in lines[0] and "(also 'workload.epochs' (line 16): 1 more problem)" in lines[0]


def test_every_problem_of_a_saved_plan_is_named(tmp_path):
    doc = json.loads(run_cli(["-o", "json", "plan", str(G5), "--offline"], tmp_path).stdout)
    doc["options"][0]["count"] = "many"
    doc["options"][0]["hours"] = "long"
    saved = tmp_path / "plan.json"
    saved.write_text(json.dumps(doc))
    proc = run_cli(["launch", str(G5), "--plan", str(saved), "--dry-run"], tmp_path)
    assert proc.returncode == 2
    assert "(also 'options.0.hours': 1 more problem)" in proc.stderr, proc.stderr


def test_one_option_is_one_option(tmp_path):
    spec = _spec(tmp_path, "regions: [us-east-1, us-west-2]", "regions: [us-east-1]")
    proc = run_cli(["plan", spec, "--offline", "--platform", "ec2", "--layout", "g5.xlarge:1:on-demand"], tmp_path,
                   env={"COLUMNS": "120"})
    assert proc.returncode == 0, proc.stderr
    assert "1 option, top 1 shown" in " ".join(proc.stdout.split())
    plot = run_cli(["plan", spec, "--offline", "--platform", "ec2", "--layout", "g5.xlarge:1:on-demand", "--plot"],
                   tmp_path, env={"COLUMNS": "120"})
    assert "1 options" not in plot.stdout and "1 option" in plot.stdout
