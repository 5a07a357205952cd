"""Writes trainctl/catalog/calibration.json from the published figures transcribed below, each with its source.

    python scripts/catalog_sources/calibration_rows.py      # then: python scripts/eval_model.py

This script is the file's only source: never edit calibration.json by hand. To change a row, a source, a shape or the
code evidence, edit this script or the modules beside it (calibration_rows_more.py: rows of ordinary training
scripts; calibration_rows_checks.py: `check_rows`, scored but never fitted; calibration_pairs_tf32.py: `tf32_pairs`,
TF32 off and on; calibration_code_evidence.py: `code_evidence`), run it, then `python scripts/eval_model.py` (which rewrites docs/model-accuracy.md).
tests/project/test_calibration_source.py fails when the shipped JSON is not what this script writes, byte for byte.

The figures are typed in from the sources named in `sources` (tables and CSVs read on 2026-11-23); nothing is
downloaded. Model shapes: timm's GMACs column (forward FLOPs = 2 x MACs), the MPT yamls of llm-foundry
(d_model, n_layers, n_heads) with llm-foundry's own FLOP formula, the BERT paper.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import calibration_code_evidence as code  # noqa: E402
import calibration_pairs_tf32 as tf32_pairs  # noqa: E402
import calibration_rows_checks as checks  # noqa: E402
import calibration_rows_more as more  # noqa: E402

OUT = Path(__file__).resolve().parents[2] / "trainctl" / "catalog" / "calibration.json"
TIMM = "timm_rtx3090"
MOS = "llm_foundry_bench"
NEU_VIT = "neuron_trn1_vision"
NEU_ENC = "neuron_trn1_encoder"
NEMO_VIT = "nemo_vit_perf"
sources = {
  TIMM: "huggingface/pytorch-image-models results/benchmark-train-amp-nchw-pt112-cu113-rtx3090.csv (train samples/s, AMP fp16, "
        "NCHW, PyTorch 1.12, CUDA 11.3, one RTX 3090) and results/benchmark-infer-amp-nchw-pt112-cu113-rtx3090.csv (GMACs), "
        "commit c865028c34fc05cc7deea8e753b30d8cd1952591 (2022-07-27): "
        "https://github.com/huggingface/pytorch-image-models/tree/c865028c34fc05cc7deea8e753b30d8cd1952591/results",
  MOS: "mosaicml/llm-foundry scripts/train/benchmarking/README.md 'MPT Training Benchmarks' (throughput, MFU; FSDP "
       "FULL_SHARD, bf16), commit 061f2c7ce64e655100286584a7629e2a09f827ba: "
       "https://github.com/mosaicml/llm-foundry/blob/main/scripts/train/benchmarking/README.md; model shapes from "
       "scripts/train/yamls/pretrain/mpt-*.yaml",
  NEU_VIT: "AWS Neuron 'Trn1/Trn1n Training Performance', about-neuron/benchmarks/trn1/training_data_vision_transformers.csv "
           "(Neuron 2.25.0, torch-neuronx 2.7.0.2.9.0, Ubuntu 22), aws-neuron/aws-neuron-sdk commit "
           "81ce03ae261e12925e53437a0f690478e6366155 (2026-08-21; the figure is unchanged since release 2.25.0, "
           "56af36ca86ca52bae911e4c363ef4bcd1955df1a, 2025-07-31): "
           "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/benchmarks/trn1/trn1-training-performance.html",
  NEU_ENC: "AWS Neuron 'Trn1/Trn1n Training Performance', about-neuron/benchmarks/trn1/training_data_encoder.csv "
           "(Neuron 2.28.0, torch-neuronx 2.9.0.2.12.21983, Ubuntu 22), aws-neuron/aws-neuron-sdk commit "
           "81ce03ae261e12925e53437a0f690478e6366155 (2026-08-21): https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/benchmarks/trn1/trn1-training-performance.html",
  NEMO_VIT: "NVIDIA NeMo Framework user guide, Vision Transformer 'Performance' (DGX SuperPOD A100 80GB and H100 80GB, "
            "ViT g/14 on 1-16 nodes of 8, samples/s; 'out-of-box performance ... with the same configuration' on both): "
            "https://docs.nvidia.com/nemo-framework/user-guide/latest/MultimodalModels/VisionLanguageFoundation/Vit/Perf.html; "
            "model shape and batch per GPU from the same guide's 'Vision Transformer Training' predefined configurations "
            "(g/14: 1,011M parameters, hidden 1408, FFN 6144, 16 heads, 40 layers, 64 per GPU, BF16 O2): "
            "https://docs.nvidia.com/nemo-framework/user-guide/24.12/multimodalmodels/visionlanguagefoundation/vit/trainingpredefined.html",
  "NV_SPEC": "NVIDIA data sheets / architecture whitepapers: memory bandwidth RTX 3090 936 GB/s (GA102 whitepaper), "
             "A10G 600 GB/s, L4 300 GB/s, V100 SXM2 900 GB/s, A100 40GB 1,555 GB/s, A100 80GB SXM 2,039 GB/s, "
             "H100 SXM 3,350 GB/s; RTX 3090 dense FP16/BF16 tensor peak with FP32 accumulate 71 TFLOPS (GA102 whitepaper "
             "appendix), FP32 35.6 TFLOPS",
  "NEURON_ARCH": "AWS Neuron docs 'Trainium architecture' / 'Trn1 architecture': 2 NeuronCore-v2 per Trainium chip, "
                 "32 GiB HBM per chip at 820 GB/s: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/"
                 "neuron-hardware/trainium.html",
  "ASSUMED": "trainctl's own assumption, stated where it is used (docs/cost-model.md)",
}
devices = {
  "RTX3090": {"group": "GA102", "peak_tflops": {"fp16": 71.0, "bf16": 71.0, "fp32": 35.6}, "memory_gbytes_s": 936.0,
              "source": "NV_SPEC"},
  # AWS's A10G: no published training row; the A10's rows and figures stand in (same GA102 die, 24 GB GDDR6 at
  # 600 GB/s), and the plan widens the band and says so. Not the RTX 3090's: on identical code the A10 runs at
  # 0.70-0.81 of the 3090 (Lambda's table).
  "A10G": {"group": "GA102-A10", "peak_tflops": {"fp16": 125.0, "bf16": 125.0, "fp32": 31.2}, "memory_gbytes_s": 600.0,
           "source": "NV_SPEC_MORE"},
  "L4": {"group": "AD104", "memory_gbytes_s": 300.0, "source": "NV_SPEC"},
  "V100": {"group": "GV100", "memory_gbytes_s": 900.0, "source": "NV_SPEC"},
  "A100": {"group": "GA100", "memory_gbytes_s": 1555.0, "source": "NV_SPEC"},
  "A100-80GB": {"group": "GA100", "peak_tflops": {"bf16": 312.0, "fp16": 312.0, "fp32": 19.5},
                "memory_gbytes_s": 2039.0, "source": "NV_SPEC"},
  "H100": {"group": "GH100", "memory_gbytes_s": 3350.0, "source": "NV_SPEC"},
  "Trainium1": {"group": "Trainium1", "memory_gbytes_s": 820.0, "ranks_per_accelerator": 2, "source": "NEURON_ARCH"},
}
# Vision transformers (timm): tokens = (img/patch)^2 + 1 class token; forward FLOPs = 2 x GMACs.
def vit(name, layers, hidden, heads, patch, img, params_m, gmacs):
    return name, {"family": "vision", "params": params_m * 1e6, "layers": layers, "hidden": hidden, "heads": heads,
                  "tokens": (img // patch) ** 2 + 1, "forward_flops": 2 * gmacs * 1e9}
def lm(name, layers, hidden, heads, seq, params):
    # llm-foundry's MFU formula: 2 x params x tokens + attention 4 x layers x hidden x tokens^2 (forward)
    return name, {"family": "language", "params": params, "layers": layers, "hidden": hidden, "heads": heads,
                  "tokens": seq, "forward_flops": 2 * params * seq + 4 * layers * hidden * seq ** 2}
shapes = dict([
  vit("vit_tiny_patch16_224", 12, 192, 3, 16, 224, 5.72, 1.26),
  vit("vit_tiny_patch16_384", 12, 192, 3, 16, 384, 5.79, 4.70),
  vit("vit_small_patch32_224", 12, 384, 6, 32, 224, 22.88, 1.15),
  vit("vit_small_patch32_384", 12, 384, 6, 32, 384, 22.92, 3.45),
  vit("vit_small_patch16_224", 12, 384, 6, 16, 224, 22.05, 4.61),
  vit("vit_small_patch16_384", 12, 384, 6, 16, 384, 22.20, 15.52),
  vit("vit_base_patch32_224", 12, 768, 12, 32, 224, 88.22, 4.41),
  vit("vit_base_patch32_384", 12, 768, 12, 32, 384, 88.30, 13.06),
  vit("vit_base_patch16_224", 12, 768, 12, 16, 224, 86.57, 17.58),
  vit("vit_base_patch16_384", 12, 768, 12, 16, 384, 86.86, 55.54),
  vit("vit_large_patch32_224", 24, 1024, 16, 32, 224, 306.54, 15.39),
  vit("vit_large_patch32_384", 24, 1024, 16, 32, 384, 306.63, 45.31),
  vit("vit_large_patch16_224", 24, 1024, 16, 16, 224, 304.33, 61.6),
  vit("vit_large_patch16_384", 24, 1024, 16, 16, 384, 304.72, 191.21),
  # HF ViT-Base fine-tuning on Trainium: the same ViT-B/16 at 224 (timm's GMACs)
  vit("hf-vit-base-224", 12, 768, 12, 16, 224, 86.57, 17.58),
  # BERT-Large phase 1 (sequence 128): 24 layers, 1024 hidden, 16 heads, 335M parameters (BERT paper)
  more.bert("bert-large-seq128", 24, 1024, 16, 128, 335e6, 302e6),
  # NeMo ViT g/14 at 224 (patch 14: 256 patches + class token); forward FLOPs as for the LMs (2 x params x tokens +
  # attention), family vision
  ("nemo-vit-g14-224", {"family": "vision", "params": 1011e6, "layers": 40, "hidden": 1408, "heads": 16, "tokens": 257,
                        "forward_flops": 2 * 1011e6 * 257 + 4 * 40 * 1408 * 257 ** 2}),
  lm("mpt-125m-2k", 12, 768, 12, 2048, 125311488),
  lm("mpt-350m-2k", 24, 1024, 16, 2048, 355985408),
  lm("mpt-760m-2k", 24, 1536, 12, 2048, 760470528),
  lm("mpt-1b-2k", 24, 2048, 16, 2048, 1315950592),
  lm("mpt-3b-2k", 32, 2560, 20, 2048, 2651837440),
  lm("mpt-7b-2k", 32, 4096, 32, 2048, 6658859008),
  lm("mpt-13b-2k", 40, 5120, 40, 2048, 12853954560),
])
rows = []
timm_rows = [("vit_tiny_patch16_224", 2293.54, 512), ("vit_tiny_patch16_384", 512.2, 128),
             ("vit_small_patch32_224", 4447.28, 512), ("vit_small_patch32_384", 1448.56, 512),
             ("vit_small_patch16_224", 1052.92, 384), ("vit_small_patch16_384", 239.05, 64),
             ("vit_base_patch32_224", 1703.57, 512), ("vit_base_patch32_384", 542.76, 256),
             ("vit_base_patch16_224", 390.86, 192), ("vit_base_patch16_384", 96.96, 32),
             ("vit_large_patch32_224", 521.73, 256), ("vit_large_patch32_384", 168.05, 96),
             ("vit_large_patch16_224", 117.08, 64), ("vit_large_patch16_384", 29.07, 12)]
for m, sps, b in timm_rows:
    rows.append({"id": f"timm-{m}-rtx3090", "model": m, "device": "RTX3090", "precision": "fp16", "micro_batch": b,
                 "accumulation": 1, "nodes": 1, "ranks_per_node": 1, "strategy": "ddp", "checkpointing": False,
                 "attention": "eager", "samples_per_s": sps, "source": TIMM, "stack": "amp",
                 "conditions": "timm train benchmark, AMP fp16, channels-first, synthetic input, PyTorch 1.12 eager attention"})
rows.append({"id": "neuron-vit-base-trn1-1node", "model": "hf-vit-base-224", "device": "Trainium1", "precision": "bf16",
             "micro_batch": 64, "accumulation": 1, "nodes": 1, "ranks_per_node": 32, "strategy": "ddp",
             "checkpointing": False, "attention": "fused", "samples_per_s": 6587.25, "source": NEU_VIT, "stack": "tuned",
             "intra_gbytes_s": 100.0, "inter_gbps": 800.0, "transport": "efa",
             "conditions": "trn1.32xlarge, 32 NeuronCores data parallel, BF16, AdamW, global batch 2048, HF ViT-Base "
                           "fine-tuning, Neuron 2.25 (the same page gave 5,232.78 with autocast bf16 + SR on Neuron "
                           "2.16-2.17 and 5,907.61 on 2.21: the current figure is used, as for the BERT rows)"})
rows.append({"id": "neuron-bert-large-ph1-trn1-1node", "model": "bert-large-seq128", "device": "Trainium1",
             "precision": "bf16", "micro_batch": 16, "accumulation": 32, "nodes": 1, "ranks_per_node": 32,
             "strategy": "ddp", "checkpointing": False, "attention": "fused", "samples_per_s": 3826.6103,
             "source": NEU_ENC, "stack": "tuned", "intra_gbytes_s": 100.0, "inter_gbps": 800.0, "transport": "efa",
             "conditions": "trn1.32xlarge, 32 NeuronCores DP, autocast bf16 + SR, AdamW, microbatch 16, global batch "
                           "16384 (32 accumulation steps), sequence 128, Neuron 2.28"})
rows.append({"id": "neuron-bert-large-ph1-trn1-16nodes", "model": "bert-large-seq128", "device": "Trainium1",
             "precision": "bf16", "micro_batch": 16, "accumulation": 128, "nodes": 16, "ranks_per_node": 32,
             "strategy": "ddp", "checkpointing": False, "attention": "fused", "samples_per_s": 57407.9207,
             "source": NEU_ENC, "stack": "tuned", "intra_gbytes_s": 100.0, "inter_gbps": 800.0, "transport": "efa",
             "scaling_base": "neuron-bert-large-ph1-trn1-1node",
             "conditions": "16 x trn1.32xlarge (the table says trn1.32xlarge/trn1n.32xlarge; trn1.32xlarge's 800 Gbps "
                           "EFA assumed), 512 NeuronCores DP, autocast bf16 + SR, LAMB, microbatch 16, global batch "
                           "1,048,576 (128 accumulation steps), sequence 128, Neuron 2.28"})
def mos(model, device, gpus, mb, tps_per_gpu, ckpt, inter_gbps, net_words, base=None, ga=None):
    seq = 2048
    r = {"id": f"mosaic-{model}-{device.lower()}-{gpus}gpu", "model": model, "device": device, "precision": "bf16",
         "micro_batch": mb, "accumulation": 1, "nodes": gpus // 8, "ranks_per_node": 8, "strategy": "fsdp",
         "checkpointing": ckpt, "attention": "fused", "samples_per_s": tps_per_gpu * gpus / seq, "source": MOS, "stack": "tuned",
         "intra_gbytes_s": 200.0, "inter_gbps": inter_gbps, "transport": "efa",
         "conditions": f"{gpus} x {device} ({gpus // 8} node{'s' if gpus > 8 else ''} of 8), FSDP FULL_SHARD, bf16, "
                       f"microbatch {mb}{f', {ga} accumulation steps' if ga else ''}, activation checkpointing {'on' if ckpt else 'off'}, flash attention "
                       f"(triton), {tps_per_gpu:,} tokens/s/GPU at sequence 2048; {net_words}"}
    if base:
        r["scaling_base"] = base
    rows.append(r)
A40 = "A100 40GB table: 1600 Gbps RoCE between nodes (as published)"
A80 = "A100 80GB table, single node"
H = "H100 table: the interconnect is not stated; 3200 Gbps (as p5.48xlarge's EFA) ASSUMED"
for g, mb, ga, t in [(8, 12, 4, 3679), (16, 16, 1, 3645), (32, 18, 1, 3725), (64, 18, 1, 3665), (128, 18, 1, 3623)]:
    mos("mpt-7b-2k", "A100", g, mb, t, True, 1600.0, A40, None if g <= 16 else "mosaic-mpt-7b-2k-a100-16gpu", ga)
for g, mb, ga, t in [(8, 4, 16, 1668), (16, 10, 1, 1993), (32, 14, 1, 1998), (64, 16, 1, 1976), (128, 16, 1, 1972)]:
    mos("mpt-13b-2k", "A100", g, mb, t, True, 1600.0, A40, None if g <= 16 else "mosaic-mpt-13b-2k-a100-16gpu", ga)
for m, mb, t in [("mpt-125m-2k", 40, 142830), ("mpt-350m-2k", 32, 58782), ("mpt-1b-2k", 14, 20513),
                 ("mpt-3b-2k", 10, 10811), ("mpt-7b-2k", 6, 4641), ("mpt-13b-2k", 2, 2262)]:
    mos(m, "A100-80GB", 8, mb, t, False, 1600.0, A80)
mos("mpt-7b-2k", "H100", 8, 6, 10643, False, 3200.0, H)
for g, t in [(8, 4792), (16, 4767), (32, 4811), (64, 4800)]:
    mos("mpt-13b-2k", "H100", g, 2, t, False, 3200.0, H, None if g == 8 else "mosaic-mpt-13b-2k-h100-8gpu")
for g, mb, t in [(8, 14, 45455), (16, 20, 46037), (32, 20, 45130), (64, 20, 44402)]:
    mos("mpt-1b-2k", "H100", g, mb, t, False, 3200.0, H, None if g == 8 else "mosaic-mpt-1b-2k-h100-8gpu")
for g, mb, ga, t in [(8, 24, 2, 63147), (16, 24, 1, 68551), (32, 24, 1, 67971)]:
    mos("mpt-760m-2k", "H100", g, mb, t, False, 3200.0, H, None if g <= 16 else "mosaic-mpt-760m-2k-h100-16gpu", ga)
def nemo(device, nodes, sps, inter_gbps, intra, fabric_words):
    r = {"id": f"nemo-vit-g14-{device.lower()}-{nodes}node{'s' if nodes > 1 else ''}", "model": "nemo-vit-g14-224",
         "device": device, "precision": "bf16", "micro_batch": 64, "accumulation": 1, "nodes": nodes,
         "ranks_per_node": 8, "strategy": "ddp", "checkpointing": False, "attention": "fused", "samples_per_s": sps,
         "source": NEMO_VIT, "stack": "tuned", "intra_gbytes_s": intra, "inter_gbps": inter_gbps, "transport": "efa",
         "conditions": f"NeMo (Megatron) ViT g/14 pre-training, {nodes} x DGX {device} (8 GPUs each), BF16 O2, data "
                       f"parallel; 64 per GPU from the predefined g/14 configuration; gradient accumulation and "
                       f"activation checkpointing not stated on the page: none ASSUMED; {fabric_words}"}
    if nodes > 1:
        r["scaling_base"] = f"nemo-vit-g14-{device.lower()}-1node"
    rows.append(r)
for n, sps in [(1, 693), (2, 1347), (4, 2642), (8, 5454), (16, 10644)]:
    nemo("A100-80GB", n, float(sps), 1600.0, 200.0, "DGX A100 SuperPOD: 8 x 200 Gbps HDR InfiniBand per node ASSUMED")
for n, sps in [(1, 1428), (2, 2846), (4, 5737), (8, 11222), (16, 21561)]:
    nemo("H100", n, float(sps), 3200.0, 200.0, "DGX H100 SuperPOD: 8 x 400 Gbps NDR InfiniBand per node ASSUMED")
sources.update(more.SOURCES)
sources.update(checks.SOURCES)
sources.update(tf32_pairs.SOURCES)
devices.update(more.DEVICES)
for key, tflops in more.TF32.items():
    devices[key]["tf32_tflops"] = tflops
for key, gib in more.MEMORY.items():
    devices[key]["memory_gib"] = gib
shapes.update(more.SHAPES)
shapes.update(checks.SHAPES)
shapes.update(tf32_pairs.SHAPES)
rows += more.more_rows("timm train benchmark, AMP fp16, channels-first, synthetic input, PyTorch 1.12")
doc = {"scaling_rule": "A row's scaling_base is the smallest layout of the same series (model, device, source) with "
                        "the same gradient-accumulation regime: scaling efficiency compares one per-rank configuration "
                        "across node counts. (The 8-GPU MosaicML A100 runs used 4-16 accumulation steps with a smaller "
                        "microbatch for memory, the larger ones none.)",
       "about": "Published training throughput measurements that calibrate trainctl's throughput model (trainctl/perf_fit.py). "
                "Each row: the model, the device, precision, batch per rank (micro_batch x accumulation per optimizer step), "
                "nodes and ranks per node, the links, and samples/s of the whole layout as published. Nothing here is "
                "measured by trainctl; scripts/eval_model.py checks the model against every row, leaving it out in turn.",
       "date": "2026-11-28", "sources": sources, "code_evidence_why": code.WHY, "code_evidence": code.evidence(),
       "source_groups": more.SOURCE_GROUPS | tf32_pairs.SOURCE_GROUPS, "devices": devices, "model_shapes": shapes, "rows": rows,
       "check_rows_why": checks.WHY, "check_rows": checks.check_rows(),
       "tf32_pairs_why": tf32_pairs.__doc__.strip(), "tf32_pairs": tf32_pairs.tf32_pairs()}
path = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
path.write_text(json.dumps(doc, indent=1))
print(f"{len(rows)} rows -> {path}")
