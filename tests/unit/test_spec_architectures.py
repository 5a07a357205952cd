"""A model of the user's own: by its transformer shape, by a Hugging Face config.json on disk, or by params and
FLOPs alone (then a documented, conservative layer size, not the whole model as one layer)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainctl import perf
from trainctl.catalog import load_catalog
from trainctl.errors import UsageError
from trainctl.planner import PlanRequest, model_shape, plan
from trainctl.planner.quotes import Quotes
from trainctl.spec import JobSpec, load_spec
from trainctl.spec.architectures import from_hf_config, transformer

CAT = load_catalog()
GIB = 1024**3
LLAMA_SHAPE = {"layers": 32, "hidden": 4096, "heads": 32, "seq_len": 2048, "vocab": 32000, "ffn": 11008,
               "gated_mlp": True}
LLAMA_CONFIG = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                "num_key_value_heads": 32, "intermediate_size": 11008, "vocab_size": 32000,
                "max_position_embeddings": 2048, "hidden_act": "silu", "tie_word_embeddings": False}


def spec_with(model: dict, layouts=("p4d.24xlarge:1:on-demand", "p5.48xlarge:1:on-demand"), batch=4) -> JobSpec:
    return JobSpec.model_validate({
        "name": "own-model", "entrypoint": {"script": "train.py", "source_dir": "."},
        "model": {"precision": "bf16", "optimizer": "adamw", "strategy": "fsdp", **model},
        "workload": {"samples": 100_000, "batch_size_per_accelerator": batch},
        "candidates": {"layouts": list(layouts), "platforms": ["ec2"], "regions": ["us-east-1"]}})


def planned(spec: JobSpec):
    return plan(spec, CAT, Quotes.offline(spec.candidates.regions), PlanRequest(platforms=("ec2",)))


def test_llama_shape_counts_its_parameters_by_hand():
    # per layer: q, o 2 x 4096^2 + k, v 2 x 4096^2 + gated MLP 3 x 4096 x 11008 = 202,375,168;
    # x 32 = 6,476,005,376; + embedding and untied output 2 x 32,000 x 4096 = 262,144,000 -> 6,738,149,376
    arch = transformer(**LLAMA_SHAPE)
    assert arch.params == 6_738_149_376
    # forward FLOPs: 2 x (params - the looked-up embedding) x 2048 + 4 x 32 x 2048^2 x 4096
    assert arch.forward_flops_per_sample == 2 * (6_738_149_376 - 131_072_000) * 2048 + 4 * 32 * 2048**2 * 4096
    # grouped-query attention (Llama 3 8B: 8 KV heads, 14,336 MLP, 128,256 vocabulary): 8,030,261,248
    llama3 = transformer(32, 4096, 32, 8192, 128256, 14336, kv_heads=8, gated_mlp=True)
    assert llama3.params == 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336) + 2 * 128256 * 4096


def test_shape_and_config_give_the_named_architectures_memory_answer(tmp_path: Path):
    named = model_shape(spec_with({"architecture": "llama-7b"}))
    by_shape = model_shape(spec_with(LLAMA_SHAPE))
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_CONFIG))
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text("name: own\nentrypoint: {script: train.py, source_dir: .}\n"
                         "model: {config: config.json, precision: bf16, optimizer: adamw, strategy: fsdp}\n"
                         "workload: {samples: 1000, batch_size_per_accelerator: 16}\n")
    by_config = model_shape(load_spec(spec_file))
    assert by_config.params == by_shape.params == 6_738_149_376 == pytest.approx(named.params, rel=3e-4)
    for shape in (by_shape, by_config):
        for a, b in ((perf.memory_fit(shape, 40.0, 8, 16, "fsdp", 8, accumulate=True),
                      perf.memory_fit(named, 40.0, 8, 16, "fsdp", 8, accumulate=True)),
                     (perf.memory_fit(shape, 80.0, 8, 16, "fsdp", 8, accumulate=True),
                      perf.memory_fit(named, 80.0, 8, 16, "fsdp", 8, accumulate=True))):
            assert (a.fits, a.micro_batch, a.grad_accum) == (b.fits, b.micro_batch, b.grad_accum)
            assert a.total_gib == pytest.approx(b.total_gib, abs=0.01)


def test_config_json_errors_name_the_field_and_the_fix(tmp_path: Path):
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text("name: own\nentrypoint: {script: train.py, source_dir: .}\nmodel:\n  config: nope.json\n"
                         "workload: {samples: 1000, batch_size_per_accelerator: 16}\n")
    with pytest.raises(UsageError, match=r"spec.yaml:4: field 'model.config': no such file .*nope.json"):
        load_spec(spec_file)
    (tmp_path / "nope.json").write_text(json.dumps({"hidden_size": 64}))
    with pytest.raises(UsageError, match="config.json has no num_hidden_layers"):
        load_spec(spec_file)
    with pytest.raises(ValueError, match="needs all of"):
        spec_with({"layers": 4, "hidden": 64})


def test_unknown_layer_count_assumes_a_conservative_layer_not_the_whole_model():
    """params 7e9 only: width (7e9 / 0.12)^(1/3) = 3,877.9; a typical layer 12 h^2 = 180.5M; assumed twice that,
    361.0M parameters (llama-7b's real layer: 210.6M), 2.888 GB unsharded in bf16 (x (2 x 2 + 4) B)."""
    shape = model_shape(spec_with({"params": 7e9, "flops_per_sample": 8.6e13}))
    h = (7e9 / 0.12) ** (1 / 3)
    assert perf.layer_params(shape) == pytest.approx(24 * h * h) == pytest.approx(360.98e6, rel=1e-4)
    assert perf.unsharded_layer_bytes(shape, "fsdp") == pytest.approx(24 * h * h * 8)
    # a tiny model: the layer is never more than the model
    assert perf.layer_params(model_shape(spec_with({"params": 1218, "flops_per_sample": 7308}))) == 1218


@pytest.mark.parametrize("params", [7e9, 8e9])
def test_custom_7b_and_8b_models_plan_on_8_a100_40gb_and_8_h100(params):
    p = planned(spec_with({"params": params, "flops_per_sample": 6 * params * 2048}))
    assert {o.instance_type for o in p.options} == {"p4d.24xlarge", "p5.48xlarge"}
    assert any("layer count unknown" in w and "assumed to hold" in w for w in p.warnings)


def test_refusal_does_not_blame_unknown_activations():
    """1e12 parameters, no layer count: the assumed layer (2 x 12 x 20,274^2 = 9.9e9 parameters, 79 GB in bf16)
    alone exceeds a 24 GiB A10G: the reason says so, and that activations were not counted."""
    spec = spec_with({"params": 1e12, "flops_per_sample": 1e15}, layouts=("g5.48xlarge:1:on-demand",))
    p = planned(spec)
    reason = next(e.reason for e in p.excluded if e.instance_type == "g5.48xlarge")
    assert "one unsharded layer and the output buffers alone exceed memory" in reason
    assert "activations unknown, not counted" in reason and "batch's activations" not in reason


def test_hf_config_reads_gpt2_names_and_ties_by_default():
    shape = from_hf_config({"n_layer": 12, "n_embd": 768, "n_head": 12, "n_positions": 1024, "vocab_size": 50257,
                            "activation_function": "gelu_new"})
    assert shape == {"layers": 12, "hidden": 768, "heads": 12, "seq_len": 1024, "vocab": 50257, "gated_mlp": False,
                     "tie_embeddings": True}


def test_a_shape_beyond_any_model_is_refused_like_params_beyond_any_model():
    with pytest.raises(ValueError, match="beyond any model"):
        spec_with({"layers": 10000, "hidden": 1_000_000, "heads": 1, "seq_len": 10_000_000})
