"""The bench table's footnote (render/bench.py) explains the columns it shows: "regime none" is said in words
(issue 35: it was not explained), and a column a narrow terminal leaves out is not explained."""
from __future__ import annotations

from trainctl.render.bench import bench_table

ROW = {"layout": "g5.xlarge:1:spot", "platform": "sagemaker", "predicted_samples_per_s": 11732.0,
       "band": [8000.0, 16000.0], "measured_samples_per_s": 950.5, "spent_usd": 0.0123, "regime": "none",
       "job_id": "bench-vit-20261128-143913-1054", "bound_usd": 0.14}
DOC = {"layouts": [ROW, dict(ROW, layout="g5.xlarge:2:spot", regime="burst")], "not_measured": [],
       "cap_rule": "--max-usd $5", "bound_usd": 0.28, "spent_usd": 0.0246, "top_before": "a", "top_after": "b",
       "changed": True}


def _shown(monkeypatch, capsys, columns: int) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    bench_table(DOC)
    return " ".join(capsys.readouterr().out.split())


def test_the_footnote_says_what_each_regime_of_the_rows_means(monkeypatch, capsys):
    out = _shown(monkeypatch, capsys, 200)
    assert "regime none: one node, no network between nodes to measure; burst: an \"up to\" type measured on its " \
           "fresh burst credits" in out
    assert "band: the model's out-of-source band" in out and "sustained:" not in out  # only the rows' regimes


def test_a_column_a_narrow_terminal_leaves_out_is_not_explained(monkeypatch, capsys):
    out = _shown(monkeypatch, capsys, 80)
    assert "not shown at this width:" in out and "regime" in out.split("not shown at this width:")[1]
    assert "regime none" not in out and "samples/s of the whole layout" in out
