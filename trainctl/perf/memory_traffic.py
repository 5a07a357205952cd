"""Pure arithmetic: the bytes a training step moves through the accelerator's memory, and the shape a model given by
size alone most likely has (its width, layers and tokens).

Eager PyTorch runs every elementwise operation (layer norm, GELU, dropout, residual adds, softmax, batch norm, ReLU)
as its own kernel that reads and writes whole activations: that work runs at the memory bandwidth, not at the
tensor cores' peak, and it is why published plain-PyTorch rows track memory bandwidth across GPUs far more than
peak FLOPS (Lambda's ResNet-50 runs move ~1.1 GB per image on every GPU from the V100 to the H100). perf/compute_rate.py
adds these seconds to the FLOPs' and fits how many multiples of them a step moves.

- transformers: their activation bytes per sample (perf.transformer_activation_bytes: Korthikanti et al. 2022,
  34 s h per layer in 16-bit, plus 5 a s^2 for attention that materialises its scores); fp32 twice.
- CNNs (no shape in a spec): bytes in proportion to FLOPs; fp32 twice.
"""
from __future__ import annotations

from trainctl.perf.memory import PARAMS_PER_WIDTH_CUBED, ModelShape, transformer_activation_bytes

HEAD_DIM = 64            # a model given by size alone: heads = width / 64 (BERT, ViT, GPT-2; ASSUMED)


def width(shape: ModelShape) -> float:
    """The transformer's width, or for a model given by size alone the likely one (params ~ 0.12 h^3)."""
    if shape.hidden:
        return float(shape.hidden)
    return (shape.params / PARAMS_PER_WIDTH_CUBED) ** (1.0 / 3.0)


def layers(shape: ModelShape) -> int:
    """The layer count, or for a transformer given by size alone the likely one: params / (12 x width^2), the
    width estimated from the parameter count as above (a CNN without a shape: 1)."""
    if shape.layers:
        return shape.layers
    if shape.family == "cnn":
        return 1
    return max(1, round(shape.params / (12.0 * width(shape) ** 2)))


def tokens(shape: ModelShape) -> float:
    """Tokens per sample, or for a model given by size alone the count its FLOPs imply (forward ~ 2 x params x
    tokens)."""
    if shape.tokens:
        return float(shape.tokens)
    return max(1.0, shape.training_flops_per_sample / 3.0 / (2.0 * shape.params))


def _precision_bytes(shape: ModelShape) -> float:
    """Activations move in the compute precision: fp32 moves twice the bytes of fp16/bf16."""
    return 2.0 if shape.precision == "fp32" else 1.0


def cnn_traffic_seconds(shape: ModelShape, memory_gbytes_s: float) -> float:
    """A CNN's seconds per sample at 1 byte per training FLOP (16-bit; fp32 twice) at the memory bandwidth (0 for
    a transformer)."""
    if memory_gbytes_s <= 0 or shape.family != "cnn":
        return 0.0
    return _precision_bytes(shape) * shape.training_flops_per_sample / (memory_gbytes_s * 1e9)


def transformer_traffic_seconds(shape: ModelShape, memory_gbytes_s: float, eager: float = 0.0) -> float:
    """A transformer's activation bytes of one sample (without checkpointing: what the forward writes and the
    backward reads) over the memory bandwidth; 0 for a CNN. `eager`: 1 where attention materialises its scores
    (the published rows that ran PyTorch 1.x eager attention are fitted so), 0 where it does not. A plan takes 0:
    PyTorch 2's nn.MultiheadAttention and scaled_dot_product_attention, the Hugging Face models (SDPA by default
    since transformers 4.36) and timm's (fused_attn) run fused kernels unless the code writes attention by hand."""
    if memory_gbytes_s <= 0 or shape.family == "cnn":
        return 0.0
    h = width(shape)
    heads = shape.heads or max(1, round(h / HEAD_DIM))
    args = (round(tokens(shape)), round(h), heads, layers(shape), shape.precision, False)
    fused = transformer_activation_bytes(*args, fused_attention=True)
    scores = transformer_activation_bytes(*args, fused_attention=False) - fused if eager else 0.0
    return (fused + eager * scores) / (memory_gbytes_s * 1e9)
