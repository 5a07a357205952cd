"""fp32 on the CUDA cores: how much of its own peak a training step reaches, with its exponent fitted to published
runs of one script with TF32 off and on.

Pure. Where PyTorch runs fp32 matmuls without tensor cores (a V100's fp32; an Ampere or later die's fp32 with TF32 off,
upstream PyTorch's default for matmuls since 1.12), the math is 8-16x slower than the same die's 16-bit tensor
cores. Kernel launches, wave tails and the memory each GEMM waits on take the same time whatever unit multiplies,
so they weigh less against slow math: a step reaches a larger share of the SIMT peak than the tensor cores reach of
theirs. Hugging Face's Trainer on one A100 ran t5-base at 93.68 samples/s with TF32 off and 210.53 with it on
(huggingface/transformers issue #15026): x2.25, where the peaks differ x8 and one efficiency for both said x6.7.
The model keeps the die's fitted efficiency (from its tensor-core rows) and multiplies it, on the SIMT path only, by

    gain = (P_16 / P_fp32) ** gamma         (P_16: the die's dense 16-bit tensor peak)

never letting the path's rate pass its peak. gamma = 0 is the former model; gamma is fitted to the TF32 on/off pairs
of calibration.json `tf32_pairs` (their ratio depends on gamma, and hardly on the tokens per sample, which such a
source does not state). TF32 runs on the tensor cores and keeps the die's efficiency: Lambda's fp32 rows with TF32 on
A100s and H100s sit at or below it.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

GAMMA_GRID = tuple(i / 100 for i in range(0, 101))


def sixteen_bit_peak(peak_tflops: dict[str, float]) -> float:
    return max(peak_tflops.get("bf16", 0.0), peak_tflops.get("fp16", 0.0)) or peak_tflops["fp32"]


def simt_gain(peak_tflops: dict[str, float], gamma: float) -> float:
    """The efficiency multiplier of fp32 math on the CUDA cores (1 where gamma is 0)."""
    return max(1.0, sixteen_bit_peak(peak_tflops) / peak_tflops["fp32"]) ** gamma


def on_cuda_cores(peak_tflops: dict[str, float], precision: str, tf32: bool | None) -> bool:
    """fp32 whose matmuls certainly run without tensor cores: TF32 off, or a die without it."""
    return precision == "fp32" and ("tf32" not in peak_tflops or tf32 is False)


def paths(peak_tflops: dict[str, float], precision: str, tf32: bool | None,
          gamma: float) -> tuple[tuple[float, float], ...]:
    """(peak TFLOPS, efficiency multiplier) of each way the precision's math may run: one where it is known; where
    fp32's TF32 is not known on a die that has it, the TF32 path and the SIMT path (the rate is their geometric mean,
    the band holds both)."""
    if precision != "fp32":
        return ((peak_tflops[precision], 1.0),)
    simt = (peak_tflops["fp32"], simt_gain(peak_tflops, gamma))
    if "tf32" not in peak_tflops or tf32 is False:
        return (simt,)
    if tf32:
        return ((peak_tflops["tf32"], 1.0),)
    return (peak_tflops["tf32"], 1.0), simt


def path_rate(peak: float, gain: float, efficiency: float) -> float:
    """TFLOPS one path reaches: peak x efficiency x gain, never above the peak itself."""
    return min(peak * gain * efficiency, peak)


def rate(path_rates: Sequence[float]) -> float:
    return math.prod(path_rates) ** (1.0 / len(path_rates))


def fit_gamma(pairs: Sequence[tuple[float, Callable[[float], float]]]) -> float:
    """The gamma of GAMMA_GRID whose predicted off/on rate ratios are nearest (least squared log error) to the
    published ones: `pairs` holds (published ratio, gamma -> predicted ratio). 0 where there is no pair."""
    if not pairs:
        return 0.0
    return min(GAMMA_GRID, key=lambda g: sum(math.log(predict(g) / published) ** 2 for published, predict in pairs))
