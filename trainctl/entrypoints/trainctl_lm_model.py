"""The decoder-only transformer of train_lm.py: llama's shape (pre-norm RMSNorm, rotary
positions, SwiGLU MLP, causal scaled-dot-product attention), its presets, and its FLOPs.

Plain module beside the scripts (``import trainctl_lm_model``); torch only.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


@dataclass(frozen=True)
class LmConfig:
    vocab_size: int
    seq_len: int
    layers: int
    hidden: int
    heads: int
    ffn_hidden: int
    tie_embeddings: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


def swiglu_hidden(hidden: int, multiple_of: int = 256) -> int:
    """llama's FFN width: 2/3 of 4 x hidden, rounded up to a multiple (11008 for 4096)."""
    width = int(2 * 4 * hidden / 3)
    return multiple_of * math.ceil(width / multiple_of)


PRESETS: dict[str, LmConfig] = {
    # For CPU tests and demos: trains in seconds on one core.
    "tiny": LmConfig(vocab_size=512, seq_len=64, layers=2, hidden=64, heads=4,
                     ffn_hidden=swiglu_hidden(64, 16), tie_embeddings=True),
    # GPT-3 Small's shape (Brown et al. 2020, table 2.1: 12 layers, d_model 768, 12 heads,
    # 125M parameters with tied embeddings), llama-style blocks, GPT-2's vocabulary padded to a
    # multiple of 64 (50,304) for the tensor cores: 124M parameters.
    "125m": LmConfig(vocab_size=50304, seq_len=2048, layers=12, hidden=768, heads=12,
                     ffn_hidden=swiglu_hidden(768), tie_embeddings=True),
    # LLaMA-7B (Touvron et al. 2023, table 2: 32 layers, dimension 4096, 32 heads, 2,048
    # tokens; 32,000-token vocabulary, FFN 11,008): 6.74B parameters, configs/llm-7b.yaml's.
    "7b": LmConfig(vocab_size=32000, seq_len=2048, layers=32, hidden=4096, heads=32,
                   ffn_hidden=swiglu_hidden(4096), tie_embeddings=False),
}


def config_from_args(args) -> LmConfig:
    """The preset, with any size given as an argument replacing the preset's."""
    config = PRESETS[args.preset]
    overrides = {key: getattr(args, key) for key in
                 ("vocab_size", "seq_len", "layers", "hidden", "heads", "ffn_hidden")
                 if getattr(args, key, None) is not None}
    if "hidden" in overrides and "ffn_hidden" not in overrides:
        overrides["ffn_hidden"] = swiglu_hidden(overrides["hidden"])
    config = replace(config, **overrides)
    if config.hidden % config.heads or (config.hidden // config.heads) % 2:
        raise ValueError(f"--hidden {config.hidden} must split into --heads {config.heads} "
                         "heads of an even width")
    return config


def param_count(config: LmConfig) -> int:
    per_layer = 4 * config.hidden ** 2 + 3 * config.hidden * config.ffn_hidden + 2 * config.hidden
    embeddings = config.vocab_size * config.hidden * (1 if config.tie_embeddings else 2)
    return config.layers * per_layer + embeddings + config.hidden


def training_flops_per_token(config: LmConfig) -> float:
    """Model FLOPs of forward and backward per token, as PaLM's appendix B counts them for
    MFU: 6 x the matmul parameters (the output head included, the embedding lookup not) plus
    12 x layers x hidden x sequence for attention's two matmuls. Activation recomputation is
    not counted (that would be hardware FLOPs, HFU)."""
    matmul_params = (config.layers * (4 * config.hidden ** 2 + 3 * config.hidden
                                      * config.ffn_hidden)
                     + config.vocab_size * config.hidden)
    return 6.0 * matmul_params + 12.0 * config.layers * config.hidden * config.seq_len


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def rotary_tables(seq_len: int, head_dim: int, base: float = 10000.0) -> torch.Tensor:
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
    return torch.stack((angles.cos(), angles.sin()))  # (2, seq, head_dim / 2)


def apply_rotary(x: torch.Tensor, tables: torch.Tensor) -> torch.Tensor:
    """x: (batch, heads, seq, head_dim); rotates each (even, odd) pair by its angle."""
    cos, sin = tables[0, :x.shape[2]].to(x.dtype), tables[1, :x.shape[2]].to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, config: LmConfig) -> None:
        super().__init__()
        self.heads = config.heads
        self.attn_norm = RMSNorm(config.hidden)
        self.qkv = nn.Linear(config.hidden, 3 * config.hidden, bias=False)
        self.out = nn.Linear(config.hidden, config.hidden, bias=False)
        self.mlp_norm = RMSNorm(config.hidden)
        self.gate_up = nn.Linear(config.hidden, 2 * config.ffn_hidden, bias=False)
        self.down = nn.Linear(config.ffn_hidden, config.hidden, bias=False)

    def forward(self, x: torch.Tensor, rotary: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(batch, seq, 3, self.heads, -1).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        q, k = apply_rotary(q, rotary), apply_rotary(k, rotary)
        # Fused attention (flash / memory-efficient kernels on GPUs): never materialises the
        # sequence x sequence scores, which the planner's memory model relies on.
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(attended.transpose(1, 2).reshape(batch, seq, width))
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class DecoderLM(nn.Module):
    def __init__(self, config: LmConfig, activation_checkpointing: bool = False) -> None:
        super().__init__()
        self.config = config
        self.activation_checkpointing = activation_checkpointing
        self.embed = nn.Embedding(config.vocab_size, config.hidden)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.norm = RMSNorm(config.hidden)
        self.head = nn.Linear(config.hidden, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.head.weight = self.embed.weight
        # Not a parameter and not saved: recomputed from the config on every start.
        self.register_buffer("rotary", rotary_tables(config.seq_len, config.hidden // config.heads),
                             persistent=False)
        self.init_weights()

    def init_weights(self) -> None:
        """GPT-2's scheme: N(0, 0.02), residual projections scaled by 1/sqrt(2 x layers)."""
        residual_std = 0.02 / math.sqrt(2 * self.config.layers)
        for name, param in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(param)
            else:
                std = residual_std if name.endswith(("out.weight", "down.weight")) else 0.02
                nn.init.normal_(param, mean=0.0, std=std)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            if self.activation_checkpointing and self.training:
                # Keep only each block's input; recompute the rest in the backward pass.
                x = checkpoint(block, x, self.rotary, use_reentrant=False)
            else:
                x = block(x, self.rotary)
        return self.head(self.norm(x))
