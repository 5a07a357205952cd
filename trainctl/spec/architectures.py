"""Model shapes: the named architectures, a transformer described by its shape, and a Hugging Face config.json.

Pure: `from_hf_config` takes the parsed JSON (the loader reads the file; nothing goes over the network).
From a shape follow the parameters, the FLOPs per sample and (perf) the activation memory:
- parameters per layer: attention 2 h^2 + 2 h kv (q and output h x h; k and v h x kv, kv = h x kv_heads / heads
  with grouped-query attention), MLP 2 x h x ffn (3 x with a gated MLP: SwiGLU/GeGLU as LLaMA, Mistral, Qwen,
  Gemma); embeddings vocab x h, once more for an untied output layer (norms and biases left out: < 0.1%);
- forward FLOPs per sample: 2 x (parameters that multiply every token) x tokens + attention 4 x layers x tokens^2
  x h (Kaplan et al. 2020; the input embedding is looked up, not multiplied).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Family = Literal["vision", "language", "cnn"]


@dataclass(frozen=True)
class Architecture:
    """Transformer shape from which parameters, FLOPs and activation memory are derived."""

    params: float                 # parameter count
    layers: int
    hidden: int
    heads: int
    tokens_per_sample: int        # sequence length (patches + class token for ViT)
    forward_flops_per_sample: float  # published forward FLOPs (2 x MACs) where known
    family: Family
    vocab: int | None = None      # language models: logits per token (the output buffer in the memory fit)


def transformer(layers: int, hidden: int, heads: int, seq_len: int, vocab: int | None = None,
                ffn: int | None = None, kv_heads: int | None = None, gated_mlp: bool = False,
                tie_embeddings: bool = False, family: Family | None = None) -> Architecture:
    """An Architecture from its shape (see the module's docstring for the counts)."""
    kv = hidden * (kv_heads or heads) // heads
    ffn = ffn or 4 * hidden
    per_layer = 2 * hidden * hidden + 2 * hidden * kv + (3 if gated_mlp else 2) * hidden * ffn
    embedding = (vocab or 0) * hidden
    output = 0 if tie_embeddings else embedding
    params = layers * per_layer + embedding + output
    multiplying = layers * per_layer + (embedding if vocab else 0)   # the output layer multiplies every token
    flops = 2.0 * multiplying * seq_len + 4.0 * layers * seq_len ** 2 * hidden
    return Architecture(params=float(params), layers=layers, hidden=hidden, heads=heads, tokens_per_sample=seq_len,
                        forward_flops_per_sample=flops, family=family or ("language" if vocab else "vision"),
                        vocab=vocab)


# Hugging Face config.json keys per field, first match wins (LLaMA/Mistral/Qwen/BERT names, then GPT-2's).
HF_KEYS = {"layers": ("num_hidden_layers", "n_layer", "num_layers"), "hidden": ("hidden_size", "n_embd", "d_model"),
           "heads": ("num_attention_heads", "n_head"), "kv_heads": ("num_key_value_heads",),
           "ffn": ("intermediate_size", "n_inner", "ffn_dim"), "vocab": ("vocab_size",),
           "seq_len": ("max_position_embeddings", "n_positions")}
GATED_ACTIVATIONS = ("silu", "swiglu", "geglu")
GATED_MODEL_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3", "olmo2")


def from_hf_config(config: dict) -> dict:
    """The shape fields of a Hugging Face config.json (parsed), for model.layers/hidden/...: raises ValueError
    naming the key that is missing."""
    if not isinstance(config, dict):
        raise ValueError("config.json is not a JSON object")
    shape: dict = {}
    for field, keys in HF_KEYS.items():
        value = next((config[k] for k in keys if isinstance(config.get(k), int) and config[k] > 0), None)
        if value is None and field in ("layers", "hidden", "heads", "seq_len"):
            raise ValueError(f"config.json has no {' / '.join(keys)} (a positive whole number)")
        if value is not None:
            shape[field] = value
    activation = str(config.get("hidden_act") or config.get("hidden_activation") or "").lower()
    shape["gated_mlp"] = activation in GATED_ACTIVATIONS or config.get("model_type") in GATED_MODEL_TYPES
    # transformers' PretrainedConfig ties the output layer to the embedding unless the config says otherwise
    shape["tie_embeddings"] = bool(config.get("tie_word_embeddings", True))
    return shape


# Published figures: timm model cards (ViT GMACs/params), BERT paper, LLaMA paper. Forward FLOPs =
# 2 x MACs; for the language models 2 x params x tokens plus attention (4 x layers x tokens^2 x hidden).
ARCHITECTURES: dict[str, Architecture] = {
    "vit_base_patch16_224": Architecture(params=86.6e6, layers=12, hidden=768, heads=12, tokens_per_sample=197,
                                         forward_flops_per_sample=2 * 17.6e9, family="vision"),
    "vit_large_patch16_224": Architecture(params=304.3e6, layers=24, hidden=1024, heads=16, tokens_per_sample=197,
                                          forward_flops_per_sample=2 * 61.6e9, family="vision"),
    "bert-large": Architecture(params=335e6, layers=24, hidden=1024, heads=16, tokens_per_sample=512,
                               forward_flops_per_sample=2 * 335e6 * 512 + 4 * 24 * 512**2 * 1024, family="language",
                               vocab=30522),
    "llama-7b": Architecture(params=6.74e9, layers=32, hidden=4096, heads=32, tokens_per_sample=2048,
                             forward_flops_per_sample=2 * 6.74e9 * 2048 + 4 * 32 * 2048**2 * 4096, family="language",
                             vocab=32000),
    # The tiny model of the bundled entrypoint's tests and demos (32x32 images, patch 4, 2 blocks, width 64).
    "vit_micro": Architecture(params=0.11e6, layers=2, hidden=64, heads=2, tokens_per_sample=65,
                              forward_flops_per_sample=2 * 0.11e6 * 65, family="vision"),
}
