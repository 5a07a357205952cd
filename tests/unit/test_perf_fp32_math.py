"""fp32 on the CUDA cores (perf/fp32_math.py): the gain over the die's tensor-core efficiency, fitted to published
runs of one script with TF32 off and on, and kept out of the efficiency fit."""
from __future__ import annotations

import math

import pytest

from trainctl.catalog import load_calibration, load_calibration_residuals, load_catalog
from trainctl.perf import fp32_math, rate_fit

CAT, CAL = load_catalog(), load_calibration()
A100 = {"bf16": 312.0, "fp16": 312.0, "fp32": 19.5, "tf32": 156.0}
V100 = {"fp16": 125.0, "fp32": 15.7}


def test_paths_by_precision_and_tf32():
    gain = 16.0 ** 0.5
    assert fp32_math.paths(A100, "bf16", None, 0.5) == ((312.0, 1.0),)
    assert fp32_math.paths(A100, "fp32", True, 0.5) == ((156.0, 1.0),)
    assert fp32_math.paths(A100, "fp32", False, 0.5) == ((19.5, gain),)
    assert fp32_math.paths(A100, "fp32", None, 0.5) == ((156.0, 1.0), (19.5, gain))   # not known: both
    assert fp32_math.paths(V100, "fp32", None, 0.5) == ((15.7, math.sqrt(125.0 / 15.7)),)   # no TF32 on the die
    assert fp32_math.on_cuda_cores(V100, "fp32", None) and fp32_math.on_cuda_cores(A100, "fp32", False)
    assert not fp32_math.on_cuda_cores(A100, "fp32", None) and not fp32_math.on_cuda_cores(A100, "bf16", False)


def test_a_path_never_runs_past_its_peak():
    assert fp32_math.path_rate(19.5, 4.0, 0.2) == pytest.approx(15.6)
    assert fp32_math.path_rate(19.5, 4.0, 0.4) == 19.5
    assert fp32_math.rate([156.0 * 0.4, 19.5]) == pytest.approx(math.sqrt(62.4 * 19.5))


def test_gamma_is_the_grid_value_nearest_the_published_ratios():
    # a made-up pair whose predicted ratio is 8 / 2 ** (4 gamma): the published 2.0 is met at gamma 0.5
    assert fp32_math.fit_gamma([(2.0, lambda g: 8.0 / 2.0 ** (4 * g))]) == 0.5
    assert fp32_math.fit_gamma([]) == 0.0


def test_the_fitted_gamma_gives_the_published_tf32_pairs_and_the_old_model_did_not():
    """Hugging Face's t5-base on one A100: TF32 off 93.68 and 97.48 samples/s, on 210.53 and 236.39 (x2.25, x2.43).
    One efficiency for both paths said x7.3; the fitted gain says what was published, within 10%."""
    fit = rate_fit.calibrated(CAT, CAL, load_calibration_residuals())
    pairs = rate_fit.pair_points(CAT, CAL)
    assert [(off.row.samples_per_s, on.row.samples_per_s) for off, on in pairs] == [(93.68, 210.53), (97.48, 236.39)]
    for off, on in pairs:
        published = off.seconds_per_sample / on.seconds_per_sample
        predict = rate_fit.pair_ratio(fit, off, on)
        assert predict(fit.simt_exponent) == pytest.approx(published, rel=0.10)
        assert predict(0.0) > 2.5 * published
    assert 0.2 < fit.simt_exponent < 0.7


def test_rows_on_the_cuda_cores_are_predicted_not_fitted_as_an_efficiency():
    """A V100's fp32 rows (no TF32) say how fast its CUDA cores ran: leaving them out of the table changes nothing in
    the efficiencies, the knee or the traffic; the sync loss still reads their 1-GPU/8-GPU pair."""
    pts = rate_fit.points(CAT, CAL)
    simt = [p for p in pts if fp32_math.on_cuda_cores(p.device.peak_tflops, p.shape.precision, p.shape.tf32)]
    assert {p.row.device for p in simt} == {"V100"} and len(simt) == 5
    kept = [p for p in pts if p not in simt]
    full, without = rate_fit.fit(pts), rate_fit.fit(kept)
    assert (full.groups, full.families, full.stacks, full.size_knee, full.transformer_traffic) == (
        without.groups, without.families, without.stacks, without.size_knee, without.transformer_traffic)
    assert full.rows == len(pts)
