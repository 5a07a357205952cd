"""`trainctl plan` on a model of the user's own, given by its Hugging Face config.json, the way a user runs it."""
from __future__ import annotations

import json
from pathlib import Path

from tests.support.helpers import run_cli, run_json

LLAMA_8B = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
            "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
            "max_position_embeddings": 131072, "hidden_act": "silu", "tie_word_embeddings": False}


def write_spec(folder: Path, config: str = "config.json") -> Path:
    spec = folder / "job.yaml"
    spec.write_text("name: own-8b\nentrypoint: {script: train.py, source_dir: .}\n"
                    f"model: {{config: {config}, seq_len: 2048, strategy: fsdp, activation_checkpointing: true}}\n"
                    "workload: {samples: 100000, batch_size_per_accelerator: 2}\n"
                    "candidates: {layouts: [p4d.24xlarge:1:on-demand, p5.48xlarge:1:on-demand], platforms: [ec2], "
                    "regions: [us-east-1]}\n")
    return spec


def test_plan_from_a_config_json_plans_8b_on_p4d_and_p5_and_names_its_assumptions(tmp_path: Path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_8B))
    doc = run_json(["plan", str(write_spec(tmp_path)), "--offline"], tmp_path)
    assert {o["instance_type"] for o in doc["options"]} == {"p4d.24xlarge", "p5.48xlarge"}
    why = doc["options"][0]["why"]
    # no train.py to read: the stack is not known, the estimate centred between the stacks
    assert any("assuming a stack it could not tell (model.stack auto: no Python file of the script could be read"
               in w for w in why)
    assert any("errors on published sources left out of its fit" in w for w in why)
    assert not any("layer count unknown" in w for w in doc["warnings"])   # the config gives the layers


def test_a_missing_config_json_is_one_line_with_the_field_and_the_fix(tmp_path: Path):
    proc = run_cli(["plan", str(write_spec(tmp_path, "missing.json")), "--offline"], tmp_path)
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert "\n" not in line and "field 'model.config': no such file" in line and "relative to the spec file" in line


def test_stack_auto_reads_the_script_and_the_why_names_what_it_found(tmp_path: Path):
    """`model.stack: auto` on a script of the user's own: the plan reads source_dir's Python files, takes the stack
    from what they import, and says so; the same spec with nothing to read is centred between the stacks, slower
    than the tuned reading, with a band that holds the tuned reading's estimate."""
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_8B))
    spec = write_spec(tmp_path)
    blind = run_json(["plan", str(spec), "--offline", "--layout", "p5.48xlarge:1:on-demand"], tmp_path)["options"][0]
    (tmp_path / "train.py").write_text("import torch\nfrom flash_attn import flash_attn_func\n"
                                       "model = torch.compile(model)\n")
    read = run_json(["plan", str(spec), "--offline", "--layout", "p5.48xlarge:1:on-demand"], tmp_path)["options"][0]
    assert any("assuming a vendor-tuned stack (model.stack auto, taken as tuned from your code (1 Python file "
               "read): train.py:2 flash-attn; train.py:3 torch.compile)" in w for w in read["why"])
    assert read["throughput_samples_per_s"] > blind["throughput_samples_per_s"]
    assert blind["throughput_band"][0] < blind["throughput_samples_per_s"] < read["throughput_samples_per_s"] \
        <= blind["throughput_band"][1]


def test_a_published_batch_under_torch_compile_is_not_refused_for_memory(tmp_path: Path):
    """karpathy/nanochat's base training script trains its depth-20 GPT (width 1280, 10 heads, 2,048 tokens,
    vocabulary 65,536) at device_batch_size 32 on 8 x H100 80GB under torch.compile. The plan refused it (94 GiB per
    GPU): it counted 10 bytes per logit (the 16-bit logits, their fp32 copy, the log-softmax) that eager PyTorch
    keeps and the compiled step does not. The same spec with a script whose code is not read is still refused:
    eager PyTorch would keep them."""
    spec = tmp_path / "job.yaml"
    spec.write_text("name: nanochat-d20\nentrypoint: {script: base_train.py, source_dir: .}\n"
                    "model: {layers: 20, hidden: 1280, heads: 10, seq_len: 2048, vocab: 65536, optimizer: adamw}\n"
                    "workload: {samples: 100000, batch_size_per_accelerator: 32}\n"
                    "candidates: {layouts: [p5.48xlarge:1:on-demand], platforms: [ec2], regions: [us-east-1]}\n")
    blind = run_cli(["--output", "json", "plan", str(spec), "--offline"], tmp_path)
    assert blind.returncode == 3 and "out of memory" in json.loads(blind.stdout)["excluded"][0]["reason"]
    (tmp_path / "base_train.py").write_text("import torch\nmodel = torch.compile(model, dynamic=False)\n")
    doc = run_json(["plan", str(spec), "--offline"], tmp_path)
    assert [o["instance_type"] for o in doc["options"]] == ["p5.48xlarge"], doc["excluded"]


def test_tensor_parallelism_lets_the_plan_hold_what_replication_and_sharding_cannot(tmp_path: Path):
    """Llama 3.1 8B at 8,192 tokens, one sequence per rank, on trn1.32xlarge: it fits no NeuronCore replicated or
    fully sharded; with model.tensor_parallel: 32 (NeuronX Distributed's layout) each core holds 1/32 of every layer
    and the plan ranks it, saying what the collectives cost; a p5's 8 GPUs cannot hold a 32-way split."""
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_8B))
    spec = tmp_path / "job.yaml"

    def plan_with(tp: int) -> dict:
        spec.write_text("name: own-8b\nentrypoint: {script: train.py, source_dir: .}\n"
                        f"model: {{config: config.json, seq_len: 8192, tensor_parallel: {tp}}}\n"
                        "workload: {samples: 100000, batch_size_per_accelerator: 1}\n"
                        "candidates: {layouts: [trn1.32xlarge:4:on-demand, p5.48xlarge:1:on-demand], "
                        "platforms: [ec2], regions: [us-east-1]}\n")
        return run_json(["plan", str(spec), "--offline"], tmp_path)

    alone = plan_with(1)
    assert not any(o["instance_type"] == "trn1.32xlarge" for o in alone["options"])
    assert any(e["instance_type"] == "trn1.32xlarge" and "out of memory" in e["reason"] for e in alone["excluded"])
    split = plan_with(32)
    assert [o["instance_type"] for o in split["options"]] == ["trn1.32xlarge"]
    assert any(w.startswith("tensor parallel 32: ") for w in split["options"][0]["why"])
    assert any("x width 128 (4,096 over 32 tensor-parallel ranks)/(+" in w for w in split["options"][0]["why"])
    assert any(e["instance_type"] == "p5.48xlarge" and "tensor_parallel 32 does not divide the 8" in e["reason"]
               for e in split["excluded"])


def test_a_tensor_parallel_degree_the_model_cannot_take_is_one_line(tmp_path: Path):
    spec = tmp_path / "job.yaml"
    cases = [("{layers: 24, hidden: 1024, heads: 16, seq_len: 512, tensor_parallel: 3}", "must divide the attention"),
             ("{params: 2.5e7, flops_per_sample: 2.5e10, family: cnn, tensor_parallel: 2}", "a CNN is not one"),
             ("{params: 7e9, flops_per_sample: 1e14, tensor_parallel: 8}", "needs the model's shape")]
    for model, words in cases:
        spec.write_text(f"name: tp\nentrypoint: {{script: train.py, source_dir: .}}\nmodel: {model}\n"
                        "workload: {samples: 1000, batch_size_per_accelerator: 1}\n")
        proc = run_cli(["plan", str(spec), "--offline"], tmp_path)
        line = proc.stderr.strip()
        assert proc.returncode == 2 and "\n" not in line and words in line and "tensor_parallel" in line, line
    spec.write_text("name: tp\nentrypoint: {bundled: lm}\nmodel: {architecture: llama-7b, tensor_parallel: 8}\n"
                    "workload: {samples: 1000, batch_size_per_accelerator: 1}\n")
    proc = run_cli(["plan", str(spec), "--offline"], tmp_path)
    assert proc.returncode == 2 and "the bundled lm entrypoint has no tensor parallelism" in proc.stderr
