"""One predictor: scripts/eval_model.py scores the plan's own throughput for the spec a user writes, not a kinder
one. A published row's spec planned on the matching AWS layout gives the number eval_model predicts for it, band
included; a spec says nothing eval could not say (no stack label unless model.stack carries it). The headline reads
the row's script as `trainctl plan` reads a user's entrypoint.source_dir: the same spec file and code folder planned
with `trainctl plan`'s own use case give the same number and band."""
from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

from trainctl.catalog import load_calibration, load_calibration_residuals, load_catalog
from trainctl.perf import compute_rate, estimator, rate_fit
from trainctl.perf.network import fabric
from trainctl.planner import PlanRequest, plan, ranking
from trainctl.planner.quotes import Quotes
from trainctl.spec import Candidates
from trainctl.usecases.plan import PlanInputs, make_plan

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("eval_model", ROOT / "scripts" / "eval_model.py")
eval_model = sys.modules.setdefault("eval_model", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(eval_model)

CAT, CAL = load_catalog(), load_calibration()
RES = load_calibration_residuals()
FIT = rate_fit.calibrated(CAT, CAL, RES)
ROWS = {r.id: r for r in CAL.rows}


def planned(spec, layout: str):
    spec = spec.model_copy(update={"candidates": Candidates.model_validate(
        {"layouts": [layout], "platforms": ["ec2"], "regions": ["us-east-1"], "markets": ["on-demand"]})})
    return plan(spec, CAT, Quotes.offline(["us-east-1"]), PlanRequest(platforms=("ec2",))).options[0]


@pytest.mark.parametrize("row_id, layout", [("lambda-bertl-h100-8gpu", "p5.48xlarge:1:on-demand"),
                                            ("mosaic-mpt-7b-2k-a100-8gpu", "p4d.24xlarge:1:on-demand")])
def test_eval_predicts_what_the_plan_states_for_the_same_spec(row_id, layout):
    row = ROWS[row_id]
    spec = eval_model.row_spec(row, CAL.shapes[row.model])
    option = planned(spec, layout)
    inst = CAT.instance(layout.split(":")[0])
    fab = fabric(inst, 8, 1, "ec2", "baseline")
    predicted, modelled, shape = eval_model.predict(spec, row, fab, CAT, CAL, FIT, RES)
    assert shape.stack == "auto"          # a user's script, its code not read: no label reaches the prediction
    assert option.throughput_samples_per_s == pytest.approx(predicted, rel=1e-12)
    low, high = modelled.band[0] * predicted, modelled.band[1] * predicted
    assert option.throughput_band == pytest.approx((low, high), rel=1e-9)


def test_eval_calls_the_plans_functions_and_no_row_label():
    assert eval_model.model_shape is ranking.model_shape
    assert eval_model.estimator.modelled_rate is estimator.modelled_rate
    row = ROWS["mosaic-mpt-7b-2k-h100-8gpu"]       # a tuned source: the user's spec does not say so
    dims = CAL.shapes[row.model]
    assert ranking.model_shape(eval_model.row_spec(row, dims)).stack == "auto"
    assert ranking.model_shape(eval_model.row_spec(row, dims, "stack")).stack == row.stack == "tuned"
    size_only = ranking.model_shape(eval_model.row_spec(row, dims, "size"))
    assert size_only.hidden is None and estimator.band_kind(size_only, FIT) == "size"


def test_a_stack_not_known_is_centred_between_the_stacks_and_the_band_holds_both():
    """Centre: the midpoint of the least and most efficient fitted stacks (log), and the band reaches both."""
    low, high = FIT.stack_extremes()
    auto, _ = FIT.efficiency("GH100", "language", "auto")
    ends = [FIT.efficiency("GH100", "language", s)[0] for s in (low, high)]
    assert auto == pytest.approx(math.sqrt(ends[0] * ends[1]))
    row = ROWS["mosaic-mpt-7b-2k-h100-8gpu"]
    option = planned(eval_model.row_spec(row, CAL.shapes[row.model]), "p5.48xlarge:1:on-demand")
    band = (option.throughput_band[0] / option.throughput_samples_per_s,
            option.throughput_band[1] / option.throughput_samples_per_s)
    span = FIT.stack_span("auto")
    assert band[0] <= span[0] < 1 < span[1] <= band[1]
    assert any("stack it could not tell (model.stack auto, the script's code not read)" in w for w in option.why)


@pytest.mark.parametrize("row_id, layout, stack", [("lambda-bertl-h100-8gpu", "p5.48xlarge:1:on-demand", "amp"),
                                                   ("mosaic-mpt-7b-2k-a100-8gpu", "p4d.24xlarge:1:on-demand", "tuned")])
def test_the_headline_reads_the_code_as_trainctl_plan_reads_a_users_source_dir(tmp_path, row_id, layout, stack):
    """The row's script excerpts in a folder, its spec beside them: `trainctl plan`'s use case (make_plan, which
    reads entrypoint.source_dir) states the throughput and band eval_model's headline predicts, from the `code` band."""
    import yaml

    row = ROWS[row_id]
    script = eval_model.write_code(tmp_path, CAL.code_files(row))
    doc = eval_model.row_doc(row, CAL.shapes[row.model], "code", script) | {"candidates": {
        "layouts": [layout], "platforms": ["ec2"], "regions": ["us-east-1"], "markets": ["on-demand"]}}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(doc))
    _, planned_doc = make_plan(PlanInputs(spec_path=str(tmp_path / "job.yaml"), offline=True, platform="ec2"))
    option = planned_doc.options[0]
    spec, code = eval_model.row_code(row, CAL.shapes[row.model])
    assert code.stack == stack and code.files == len(CAL.code_files(row))
    fab = fabric(CAT.instance(layout.split(":")[0]), 8, 1, "ec2", "baseline")
    predicted, modelled, shape = eval_model.predict(spec, row, fab, CAT, CAL, FIT, RES, code)
    assert shape.stack == stack and estimator.band_kind(shape, FIT) == "code"
    assert option.throughput_samples_per_s == pytest.approx(predicted, rel=1e-12)
    assert option.throughput_band == pytest.approx((modelled.band[0] * predicted, modelled.band[1] * predicted),
                                                   rel=1e-9)
    assert any(f"taken as {stack} from your code" in w for w in option.why)


def test_every_fitted_row_has_its_scripts_code_verbatim_with_where_it_is_from():
    """calibration.json code_evidence: each fitted row's source names the script(s) that produced it, each with a
    repository, a path, a full commit and its date, and lines only (no label)."""
    for row in CAL.rows:
        assert CAL.code_files(row), row.id
    for entries in CAL.code_evidence.values():
        for entry in entries:
            assert set(entry) <= {"models", "files"}
            for f in entry["files"]:
                assert set(f) == {"repo", "path", "commit", "date", "lines"}
                assert len(f["commit"]) == 40 and "/" in f["repo"] and f["lines"]


def test_the_stored_summary_is_the_user_predictor_and_the_bands_are_per_kind():
    summary = RES["leave_source_out"]
    scored = summary["rows"] + len(summary["refused"])      # every fitted row: scored, or refused for memory
    assert scored == len(CAL.rows) == RES["leave_source_out_code_not_read"]["rows"] + len(summary["refused"])
    for kind in ("code", "auto", "stack", "size"):
        for seen in ("seen", "unseen"):
            band = RES[f"band_{seen}_{kind}"]
            assert band["ratio_low"] < 1 < band["ratio_high"]


def test_a_plan_says_when_its_band_could_change_the_top_choice_and_the_price_of_settling_it():
    """H100s against A100s for the 7B LM: their bands overlap, one line with what `trainctl bench` would measure
    and its dollar bound. One and two p5s share the device, hence the model's error: no line. With the throughput
    given in the spec there is no band and no line."""
    from trainctl.planner import bench_choice
    from trainctl.spec import load_spec

    def made(layouts, throughput=None):
        spec = load_spec(ROOT / "configs" / "llm-7b.yaml")
        spec = spec.model_copy(update={"throughput": throughput or {}, "candidates": Candidates.model_validate(
            {"layouts": layouts, "platforms": ["ec2"], "regions": ["us-east-1"], "markets": ["on-demand"]})})
        return plan(spec, CAT, Quotes.offline(["us-east-1"]), PlanRequest(platforms=("ec2",), spec_path="job.yaml"))

    def unsure(p):
        return [w for w in p.warnings if w.startswith("throughput uncertain enough to change the top choice")]

    mixed = made(["p5.48xlarge:1:on-demand", "p4d.24xlarge:2:on-demand"])
    named = ("p4d.24xlarge:2:on-demand", "p5.48xlarge:1:on-demand")   # the top, then its rival
    price = bench_choice.choose(mixed, layouts=named).bound_usd
    assert len(unsure(mixed)) == 1 and (f"`trainctl bench job.yaml --layout {named[0]} --layout {named[1]}` settles "
                                        f"it for at most ${price:,.2f}") in unsure(mixed)[0]
    assert not unsure(made(["p5.48xlarge:1:on-demand", "p5.48xlarge:2:on-demand"]))
    assert not unsure(made(["p5.48xlarge:1:on-demand", "p4d.24xlarge:2:on-demand"], {"H100": 5.0, "A100": 2.5}))


def test_coverage_is_measured_on_the_band_the_plan_states_fp32_included():
    """An fp32 transformer whose code does not say whether TF32 is on: the plan widens its band to hold both peaks
    as well as every stack; eval_model measures coverage on that same band (it once left the TF32 widening out and
    reported 78% where the plan's bands held 84%)."""
    row = ROWS["lambda-bertl-a100-80gb-1gpu-fp32"]
    spec = eval_model.row_spec(row, CAL.shapes[row.model])
    shape = ranking.model_shape(spec)
    device = compute_rate.device_for(CAT, CAL, row.device)
    span = estimator.band_span(shape, device, FIT)
    assert span[0] < FIT.stack_span("auto")[0] and span[1] > FIT.stack_span("auto")[1]
    point = next(p for p in rate_fit.points(CAT, CAL) if p.row.id == row.id)
    result = next(r for r in eval_model._predict_fold(rate_fit.points(CAT, CAL), [point], CAT, CAL, "-", False,
                                                      rate_fit.pair_points(CAT, CAL))
                  if r.way == "auto")
    assert result.span == pytest.approx(span)
    modelled = estimator.modelled_rate(shape, row.device, 1, row.micro_batch, "GPU", CAT, CAL, FIT, RES)
    assert modelled.band[0] <= span[0] and modelled.band[1] >= span[1]


def test_a_run_a_spec_cannot_express_is_refused_and_tensor_parallelism_lets_the_spec_say_it():
    """The Neuron Llama 3.1 8B row ran with 32-way tensor parallelism. Without model.tensor_parallel its spec does
    not fit a NeuronCore's 16 GiB, replicated or fully sharded: the plan excludes the layout and the evaluation
    (the same check, planner.memory_admission) counts the row as refused. With it, the plan admits the layout and
    states the number the evaluation scores, band included, and says what the collectives cost."""
    assert eval_model.memory_fits is ranking.memory_fits
    row = ROWS["neuron-llama3.1-8b-trn1-32nodes"]
    assert row.tensor_parallel == 32
    doc = eval_model.row_doc(row, CAL.shapes[row.model])
    assert doc["model"]["tensor_parallel"] == 32
    without = eval_model.JobSpec.model_validate({**doc, "model": {**doc["model"], "tensor_parallel": 1}})
    assert "out of memory" in eval_model.refusal(without, ranking.model_shape(without), row, CAL)
    refused = plan(without.model_copy(update={"candidates": Candidates.model_validate(
        {"layouts": ["trn1.32xlarge:32:on-demand"], "platforms": ["ec2"], "regions": ["us-east-1"],
         "markets": ["on-demand"]})}), CAT, Quotes.offline(["us-east-1"]), PlanRequest(platforms=("ec2",)))
    assert not refused.options and "out of memory" in refused.excluded[0].reason

    spec = eval_model.row_spec(row, CAL.shapes[row.model])
    assert eval_model.refusal(spec, ranking.model_shape(spec), row, CAL) == ""
    option = planned(spec, "trn1.32xlarge:32:on-demand")
    fab = fabric(CAT.instance("trn1.32xlarge"), 32, 32, "ec2", "baseline")
    predicted, modelled, _ = eval_model.predict(spec, row, fab, CAT, CAL, FIT, RES)
    assert option.throughput_samples_per_s == pytest.approx(predicted, rel=1e-12)
    assert option.throughput_band == pytest.approx((modelled.band[0] * predicted, modelled.band[1] * predicted))
    assert any(w.startswith("tensor parallel 32: ") and "s/step of activation collectives" in w for w in option.why)
    # a row that ran on a larger card than its device key's is checked on that card: torchtitan's 96 GB H100
    titan = ROWS["titan-llama3-8b-h100-8gpu-amp"]
    titan_spec = eval_model.row_spec(titan, CAL.shapes[titan.model])
    assert titan.memory_gib == 96.0
    assert eval_model.refusal(titan_spec, ranking.model_shape(titan_spec), titan, CAL) == ""


def test_the_report_states_how_many_published_runs_the_plan_refuses():
    text = (ROOT / "docs" / "model-accuracy.md").read_text()
    line = next(x for x in text.splitlines() if x.startswith("| published runs the plan refuses for memory"))
    assert line.endswith(f"| {len(RES['leave_source_out']['refused'])}/{len(CAL.rows)} | 0 | yes |")


def test_a_cnn_plan_says_it_cannot_tell_the_architecture_with_the_check_rows_figures_and_the_bench_price():
    """A CNN is given by its size; the plan models it on ResNets and says so once, with how far off the published
    depthwise-separable rows were (calibration_fit.json check_rows, written by eval_model) and what a bench of the
    top layout costs. A transformer given by its shape gets no such line; nor does a CNN whose throughput is given."""
    def planned_warnings(doc):
        spec = eval_model.JobSpec.model_validate(doc)
        spec = spec.model_copy(update={"candidates": Candidates.model_validate(
            {"layouts": ["g5.xlarge:1:on-demand", "g5.xlarge:2:on-demand"], "platforms": ["ec2"],
             "regions": ["us-east-1"], "markets": ["on-demand"]})})
        return plan(spec, CAT, Quotes.offline(["us-east-1"]), PlanRequest(platforms=("ec2",))).warnings

    cnn = {"name": "detector", "entrypoint": {"script": "train.py", "source_dir": "."},
           "model": {"params": 3.9e6, "flops_per_sample": 1.5e10, "family": "cnn", "precision": "fp16"},
           "workload": {"samples": 1_000_000, "batch_size_per_accelerator": 32}}
    lines = [w for w in planned_warnings(cnn) if w.startswith("a CNN given by its size")]
    low, high = RES["check_rows"]["predicted_over_published"]
    assert len(lines) == 1 and f"x{low:.1f} to x{high:.0f}" in lines[0] and "efficientdet" in lines[0]
    assert "`trainctl bench detector --layout g5.xlarge:1:on-demand` measures it for at most $" in lines[0]
    given = cnn | {"throughput": {"g5.xlarge": 100.0}}
    assert not [w for w in planned_warnings(given) if "CNN" in w]
    row = ROWS["lambda-bertl-a100-80gb-1gpu"]
    assert not [w for w in planned_warnings(eval_model.row_doc(row, CAL.shapes[row.model])) if "CNN" in w]
