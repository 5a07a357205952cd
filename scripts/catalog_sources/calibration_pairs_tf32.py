"""calibration.json `tf32_pairs`: one script, one batch, one GPU, run with TF32 off and on.

A pair fits one number, gamma (trainctl/perf/fp32_math.py): how much more of its own peak fp32 math on the CUDA cores
reaches than the tensor cores reach of theirs. Only the ratio of a pair's two rates is used, and that ratio hardly
depends on the tokens per sample (compute and memory traffic both grow with them), which such a source does not
state; so a pair is never fitted as a row (its absolute rate would rest on the ASSUMED tokens) and never scored.
Its source is its own source group: the leave-one-source-out evaluation of every other row keeps it, and the
fp32 rows of NVIDIA's scripts (all TF32 on in NGC containers, or V100s without TF32) are predicted with a gamma
they did not set.
"""
HF_A100 = "hf_trainer_a100"

SOURCES = {
    HF_A100: "huggingface/transformers issue #15026 '[Benchmark] HF Trainer on A100' (stas00, 2022-01-04), comment "
             "'gradient accumulation steps': t5-base, the transformers example translation script (examples/pytorch/translation) on wmt16 ro-en "
             "(--max_source_length 512 --max_target_length 512, --source_prefix 'translate English to Romanian: '), "
             "one A100 40GB, train samples/s: --gradient_accumulation_steps 1: --tf32 0 93.68, --tf32 1 210.53; "
             "--gradient_accumulation_steps 2: --tf32 0 97.48, --tf32 1 236.39 (--tf32 1 sets "
             "torch.backends.cuda.matmul.allow_tf32, the issue's own words); per-device batch 16 for t5-base, as the "
             "issue's 'precision' comment sets it (ASSUMED to hold in the accumulation comment): https://github.com/huggingface/transformers/issues/15026",
}

SOURCE_GROUPS = {
    "hf-trainer": {"sources": [HF_A100], "why": "Hugging Face Trainer example scripts (TF32 pairs only)"},
}

# t5-base (Raffel et al. 2020; the Hugging Face config): 12 encoder and 12 decoder blocks, width 768, 12 heads, FFN
# 3072, vocabulary 32,128, 223M parameters. Multiplying per token: encoder 12 x (4 x 768^2 + 2 x 768 x 3072) = 84.9M,
# decoder 12 x (8 x 768^2 + 2 x 768 x 3072) = 113.2M (self- and cross-attention), output layer 24.7M: 222.8M.
# Tokens: wmt16 sentences padded to the longest in each batch (the example script pads dynamically unless told
# --pad_to_max_length): 128 a side ASSUMED; the pair's predicted ratio moves under 10% between 64 and 256.
SHAPES = {"t5-base-wmt16": {"family": "language", "params": 223e6, "layers": 24, "hidden": 768, "heads": 12,
                            "tokens": 128, "forward_flops": 2 * 222.8e6 * 128 + 4 * 24 * 768 * 128 ** 2}}


def _row(tf32: bool, accumulation: int, samples_per_s: float) -> dict:
    return {"id": f"hf-t5base-a100-gas{accumulation}-{'tf32' if tf32 else 'fp32'}", "model": "t5-base-wmt16",
            "device": "A100", "precision": "fp32", "micro_batch": 16, "accumulation": accumulation, "nodes": 1,
            "ranks_per_node": 1, "strategy": "ddp", "checkpointing": False, "attention": "eager",
            "samples_per_s": samples_per_s, "source": HF_A100, "stack": "amp", "tf32": tf32,
            "conditions": f"Hugging Face Trainer, t5-base translation, one A100 40GB, batch 16, gradient accumulation "
                          f"{accumulation}, fp32 with TF32 {'on (--tf32 1)' if tf32 else 'off (--tf32 0)'}"}


def tf32_pairs() -> list[dict]:
    return [{"tf32_off": _row(False, gas, off), "tf32_on": _row(True, gas, on)}
            for gas, off, on in ((1, 93.68, 210.53), (2, 97.48, 236.39))]
