"""The bytes a step moves through memory, and the shape a transformer given by size alone most likely has."""
from __future__ import annotations

import pytest

from trainctl import perf
from trainctl.perf import memory_traffic


def size_only(params: float, tokens: int, precision: str = "bf16", family: str = "language") -> perf.ModelShape:
    return perf.ModelShape(params=params, training_flops_per_sample=6 * params * tokens, precision=precision,
                           optimizer="adam", activation_bytes_per_sample=None, family=family, stack="auto")


def test_a_size_only_transformer_gets_the_tokens_its_flops_imply():
    """Forward ~ 2 x params x tokens, so 6 x 1e9 x 2048 training FLOPs -> 2048 tokens; width from 0.12 h^3 = params,
    layers from 12 h^2 per layer."""
    big = size_only(1e9, 2048)
    assert memory_traffic.tokens(big) == pytest.approx(2048)
    h = (1e9 / 0.12) ** (1 / 3)
    assert memory_traffic.width(big) == pytest.approx(h)
    assert memory_traffic.layers(big) == round(1e9 / (12 * h * h))
    heads = round(h / memory_traffic.HEAD_DIM)
    by_hand = perf.transformer_activation_bytes(2048, round(h), heads, memory_traffic.layers(big), "bf16", False)
    assert memory_traffic.transformer_traffic_seconds(big, 2000.0) == pytest.approx(by_hand / 2000e9)


def test_a_cnn_moves_bytes_in_proportion_to_its_flops_and_fp32_twice():
    cnn = size_only(25e6, 1, family="cnn")
    assert memory_traffic.cnn_traffic_seconds(cnn, 1000.0) == pytest.approx(cnn.training_flops_per_sample / 1e12)
    fp32 = size_only(25e6, 1, precision="fp32", family="cnn")
    assert memory_traffic.cnn_traffic_seconds(fp32, 1000.0) == pytest.approx(2 * cnn.training_flops_per_sample / 1e12)
    assert memory_traffic.transformer_traffic_seconds(cnn, 1000.0) == 0.0
    assert memory_traffic.cnn_traffic_seconds(size_only(1e9, 2048), 1000.0) == 0.0
