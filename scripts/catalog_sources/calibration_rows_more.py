"""Published rows from sources that ordinary training scripts resemble (issue: the plan's numbers for a user's model).

Imported by calibration_rows.py. Every figure below is typed in from the file named in SOURCES (read 2026-11-25);
nothing is downloaded. Conditions the source does not state are marked ASSUMED in the row's `conditions`.
Stacks: `tuned` (vendor-tuned pretraining recipes: Megatron/NeMo, llm-foundry, AWS's Neuron tables, NVIDIA's BERT
pretraining recipe), `amp` (plain PyTorch with automatic mixed precision, eager), `compile` (torch.compile).
"""
LAMBDA = "lambda_dle_bench"
DLE = "dle_readme"
TITAN = "torchtitan_bench"
NEU_DEC = "neuron_trn1_decoder"
SOURCES = {
  LAMBDA: "lambdal/deeplearning-benchmark pytorch/pytorch-train-throughput-fp16.csv and -fp32.csv (samples/s) and "
          "pytorch/pytorch-train-bs-fp16.csv and -fp32.csv (global batch), commit aa5addb6a53675a649a80036dad548f1c27cbcc4: NVIDIA "
          "DeepLearningExamples scripts (LambdaLabsML fork, branch lambda/benchmark) in the nvcr.io/nvidia/pytorch:22.09-py3 "
          "container (pytorch/scripts/compile_results_pytorch.py: version 1 = 22.09), fp16 AMP; ResNet-50 v1.5 with "
          "synthetic data, BERT SQuAD v1.1 fine-tuning at sequence 384 (pytorch/scripts/patch/run_squad.sh): "
          "https://github.com/lambdal/deeplearning-benchmark/tree/aa5addb6a53675a649a80036dad548f1c27cbcc4/pytorch The "
          "8-GPU A100 80GB and V100 rows ran while pytorch/scripts/benchmark_pytorch.sh exported NCCL_P2P_DISABLE=1 "
          "(commits 0a684b62 to aad0d1cd; results committed 416693c3 and 357c49a7), which 'disables the peer to peer "
          "(P2P) transport, which uses CUDA direct access between GPUs, using NVLink or PCI' (NCCL user guide, "
          "Environment Variables): their rows take a PCIe link; the 8-GPU H100 rows (a8e6d619, 2023-02-14) ran after "
          "it was commented out.",
  DLE: "NVIDIA/DeepLearningExamples READMEs, commit 729963dd47e7c8bd462ad10bfac7a7b0b604e6dd: "
       "PyTorch/Classification/ConvNets/resnet50v1.5/README.md 'Training performance results' (pytorch-21.03 NGC, "
       "batch 256 per GPU AMP NHWC per ConvNets/configs.yml) and PyTorch/LanguageModeling/BERT/README.md 'Training "
       "performance results' (pytorch:21.11-py3 NGC; pre-training and SQuAD fine-tuning): "
       "https://github.com/NVIDIA/DeepLearningExamples/tree/729963dd47e7c8bd462ad10bfac7a7b0b604e6dd/PyTorch",
  TITAN: "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md, Tables 1 and 3 (Llama 3.1 8B, FSDP, local "
         "batch 2, selective activation checkpointing, TPS/GPU, H100 96GB HBM2e at 500 W; torch 1963fc8, torchtitan "
         "9dec370, 2024-12), sequence 8192 from train_configs/llama3_8b.toml at 9dec370: "
         "https://github.com/pytorch/torchtitan/blob/main/benchmarks/llama3_h100_202412_torchtitan.md",
  NEU_DEC: "AWS Neuron 'Trn1/Trn1n Training Performance', about-neuron/benchmarks/trn1/training_data_decoder.csv "
           "(Llama-3.1-8B pre-training, 32 nodes, TP=32 DP=32 ZeRO-1, microbatch 1, global batch 1024, sequence 8192, "
           "Neuron 2.24.0), aws-neuron/aws-neuron-sdk commit 81ce03ae261e12925e53437a0f690478e6366155: "
           "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/benchmarks/trn1/trn1-training-performance.html",
  "NV_SPEC_TF32": "NVIDIA data sheets, TF32 tensor-core peak without sparsity (the sheets print it with sparsity, "
                  "twice these): A100 156 TFLOPS (A100 datasheet), H100 SXM 494.7 (H100 datasheet: 989 with sparsity), "
                  "A10 62.5 (A10 datasheet: 125 with sparsity), L4 60 (L4 datasheet: 120 with sparsity), RTX 3090 35.6 "
                  "(GA102 whitepaper appendix); V100 has no TF32",
  "NV_SPEC_MORE": "NVIDIA data sheets: A10 FP16/BF16 tensor 125 TFLOPS dense, FP32 31.2, 600 GB/s GDDR6 (NVIDIA A10 "
                  "datasheet); V100 SXM2 125 TFLOPS FP16 tensor (V100 datasheet)",
  "NV_SPEC_MEMORY": "NVIDIA data sheets, memory per GPU: RTX 3090 24 GB GDDR6X, A10 and A10G 24 GB GDDR6, L4 24 GB, "
                    "V100 SXM2 16 GB (32 GB where a row says so: DGX-1 V100 32GB), A100 40 GB and 80 GB, H100 SXM 80 GB "
                    "(96 GB where a row says so); Trainium1: 32 GiB per chip (NEURON_ARCH)",
}
# Sources that resemble each other are held out together by the evaluation (one group = one held-out unit).
SOURCE_GROUPS = {
  "timm": {"sources": ["timm_rtx3090"], "why": "timm's own benchmark script"},
  "nvidia-dle": {"sources": [LAMBDA, DLE, "dle_effdet_readme"],
                 "why": "NVIDIA DeepLearningExamples' scripts (ResNet-50, BERT, EfficientDet) in NGC containers"},
  "mosaicml": {"sources": ["llm_foundry_bench"], "why": "llm-foundry's tuned FSDP stack"},
  "nemo": {"sources": ["nemo_vit_perf"], "why": "NVIDIA NeMo (Megatron) recipes"},
  "torchtitan": {"sources": [TITAN], "why": "PyTorch-native FSDP2 (eager and torch.compile)"},
  "aws-neuron": {"sources": ["neuron_trn1_vision", "neuron_trn1_encoder", NEU_DEC],
                 "why": "one AWS Neuron performance page, one compiler"},
}
# Dense TF32 peaks (NV_SPEC_TF32): a spec's fp32 is measured against them where the die has TF32 (compute_rate.py).
TF32 = {"A100": 156.0, "A100-80GB": 156.0, "H100": 494.7, "A10": 62.5, "A10G": 62.5, "L4": 60.0, "RTX3090": 35.6}
# Memory per accelerator (NV_SPEC_MEMORY, NEURON_ARCH): the plan's memory check runs on every row
# (scripts/eval_model.py), so a published run the plan would refuse is counted as refused. A row on a larger card
# than its device key's says so (row memory_gib).
MEMORY = {"RTX3090": 24.0, "A10": 24.0, "A10G": 24.0, "L4": 24.0, "V100": 16.0, "A100": 40.0, "A100-80GB": 80.0,
          "H100": 80.0, "Trainium1": 32.0}
DEVICES = {
  # Lambda's A10 (PCIe, 150 W). AWS's A10G has no published training row: the A10's rows stand in for it.
  "A10": {"group": "GA102-A10", "peak_tflops": {"fp16": 125.0, "bf16": 125.0, "fp32": 31.2}, "memory_gbytes_s": 600.0,
          "source": "NV_SPEC_MORE"},
}


def cnn(name, params_m, gmacs):
    return name, {"family": "cnn", "params": params_m * 1e6, "forward_flops": 2 * gmacs * 1e9}


def bert(name, layers, hidden, heads, seq, params, matmul_params):
    """Forward FLOPs = 2 x the parameters that multiply every token x tokens + attention 4 x layers x hidden x
    tokens^2. An encoder's embedding tables are looked up, not multiplied (BERT-Large: 302M of 335M multiply); a
    decoder's untied output layer multiplies every token (Llama 3.1 8B: all but the 525M input embedding)."""
    return name, {"family": "language", "params": params, "layers": layers, "hidden": hidden, "heads": heads,
                  "tokens": seq, "forward_flops": 2 * matmul_params * seq + 4 * layers * hidden * seq ** 2}


SHAPES = dict([
  # timm results/benchmark-infer-amp-nchw-pt112-cu113-rtx3090.csv: infer_gmacs, param_count (M)
  cnn("resnet18", 11.69, 1.82), cnn("resnet34", 21.8, 3.67), cnn("resnet50", 25.56, 4.11),
  cnn("resnet101", 44.55, 7.83), cnn("resnet152", 60.19, 11.56),
  # BERT (Devlin et al.): Large 24 x 12.6M per layer = 302M multiplying of 335M; Base 12 x 7.1M = 85M of 110M
  bert("bert-large-seq384", 24, 1024, 16, 384, 335e6, 302e6), bert("bert-base-seq384", 12, 768, 12, 384, 110e6, 85e6),
  bert("bert-large-seq512", 24, 1024, 16, 512, 335e6, 302e6),
  # Llama 3.1 8B: 32 layers, width 4096, 32 heads, 8.03e9 parameters, vocabulary 128,256 (torchtitan ModelArgs "8B"),
  # 8k tokens; the input embedding (128,256 x 4096 = 525M) is looked up
  bert("llama3.1-8b-8k", 32, 4096, 32, 8192, 8.03e9, 8.03e9 - 128256 * 4096),
])
# Links inside the node: NVSwitch A100 200 GB/s, H100 350 GB/s, NVLink V100 100 GB/s (the network model's figures).
INTRA = {"V100": 100.0, "A100": 200.0, "A100-80GB": 200.0, "H100": 350.0, "RTX3090": 12.0, "A10": 12.0}
# Lambda's 8-GPU V100 and A100 80GB rows ran while their benchmark script exported NCCL_P2P_DISABLE=1 (SOURCES, LAMBDA):
# NCCL's collectives went through host memory over PCIe, not NVLink. Per device: the day the rows were run, the PCIe
# generation, and that generation's figure among the catalog's PCIe links (GB/s). The H100 rows ran after it was gone.
P2P_DISABLED = {"V100": ("2022-12-16", "PCIe 3.0", 6.0), "A100-80GB": ("2022-11-19", "PCIe 4.0", 12.0)}


def p2p_disabled(dev):
    """What a Lambda 8-GPU row's conditions end with, and its link in GB/s, where the run had P2P off; ("", None)
    where it had not."""
    if dev not in P2P_DISABLED:
        return "", None
    day, pcie, gbytes_s = P2P_DISABLED[dev]
    return (f"; run {day} by pytorch/scripts/benchmark_pytorch.sh as it then was, which exported NCCL_P2P_DISABLE=1 "
            f"(from 0a684b62, 2022-10-16, until aad0d1cd, 2023-02-06): NCCL's collectives went through host memory "
            f"over {pcie}, not NVLink; {gbytes_s:g} GB/s, the {pcie} figure of the catalog's PCIe links (ASSUMED)",
            gbytes_s)


def row(rid, model, device, batch, sps, source, stack, conditions, gpus=1, nodes=1, accumulation=1, attention="eager",
        strategy="ddp", inter_gbps=0.0, scaling_base=None, precision="fp16", checkpointing=False, tf32=False,
        intra=None, memory_gib=None, tensor_parallel=1):
    r = {"id": rid, "model": model, "device": device, "precision": precision, "micro_batch": batch,
         "accumulation": accumulation, "nodes": nodes, "ranks_per_node": gpus, "strategy": strategy,
         "checkpointing": checkpointing, "attention": attention, "samples_per_s": float(sps), "source": source,
         "stack": stack, "intra_gbytes_s": INTRA.get(device, 100.0) if intra is None else intra,
         "inter_gbps": inter_gbps, "transport": "efa",
         "conditions": conditions}
    if scaling_base:
        r["scaling_base"] = scaling_base
    if tf32:
        r["tf32"] = True
    if memory_gib:
        r["memory_gib"] = memory_gib
    if tensor_parallel > 1:
        r["tensor_parallel"] = tensor_parallel
    return r


def lambda_rows():
    out = []
    # (device key, Lambda's name, per-GPU batch rn50 / bert-large / bert-base, samples/s 1 GPU, samples/s 8 GPUs)
    table = [("V100", "LambdaCloud V100 16GB (SXM2 ASSUMED)", (256, 16, 48), (833, 57, 189), (6174, 286)),
             ("RTX3090", "RTX 3090", (448, 28, 96), (905, 52, 172), None),
             ("A10", "LambdaCloud A10", (448, 28, 80), (638, 42, 135), None),
             ("A100", "LambdaCloud A100 40GB PCIe (taken as the p4d's A100 40GB: same die and peak, ASSUMED)",
              (720, 48, 160), (1396, 117, 368), None),
             ("A100-80GB", "A100 80GB SXM4", (1280, 112, 320), (1582, 152, 443), (11439, 746)),
             ("H100", "H100 80GB SXM5", (1280, 112, 320), (2616, 301, 812), (20728, 2167))]
    models = [("resnet50", "resnet50", "attention none"), ("bert-large-seq384", "bertl", "eager attention"),
              ("bert-base-seq384", "bertb", "eager attention")]
    for dev, name, batches, one, eight in table:
        for i, (model, short, att) in enumerate(models):
            base = f"lambda-{short}-{dev.lower()}-1gpu"
            out.append(row(base, model, dev, batches[i], one[i], LAMBDA, "amp",
                           f"{name}, 1 GPU, fp16 AMP, NGC 22.09, DeepLearningExamples script, {att}"))
            if eight and i < 2:
                p2p_words, intra = p2p_disabled(dev)
                out.append(row(f"lambda-{short}-{dev.lower()}-8gpu", model, dev, batches[i], eight[i], LAMBDA, "amp",
                               f"8 x {name}, DDP, fp16 AMP, NGC 22.09, per-GPU batch as 1 GPU, {att}{p2p_words}",
                               gpus=8, scaling_base=base, intra=intra))
    # Left out, said here: BERT-Base on 8 GPUs (published per-GPU throughput 1.2-1.4x the 1-GPU figure: no model of
    # synchronous data parallelism produces that), and GPUs AWS does not rent.
    return out


def lambda_fp32_rows():
    """The same scripts, tables and containers in fp32 (pytorch-train-throughput-fp32.csv, pytorch-train-bs-fp32.csv at
    the same commit). NGC containers allow TF32 by default, so on Ampere and Hopper these ran on TF32 tensor cores
    (ASSUMED from the container's default; the scripts do not turn it off); the V100 has no TF32."""
    out = []
    # (device key, Lambda's name, per-GPU batch rn50 / bert-large / bert-base, samples/s 1 GPU, samples/s 8 GPUs)
    table = [("V100", "LambdaCloud V100 16GB (SXM2 ASSUMED)", (128, 8, 24), (369, 12, 42), (2817, 70)),
             ("RTX3090", "RTX 3090", (224, 16, 48), (513, 24, 85), None),
             ("A10", "LambdaCloud A10", (224, 12, 48), (349, 19, 70), None),
             ("A100", "LambdaCloud A100 40GB PCIe (taken as the p4d's A100 40GB: same die and peak, ASSUMED)",
              (360, 28, 80), (882, 53, 179), None),
             ("A100-80GB", "A100 80GB SXM4", (640, 64, 172), (1066, 75, 239), (7397, 251)),
             ("H100", "H100 80GB SXM5", (640, 64, 172), (1753, 141, 408), (13856, 1042))]
    models = [("resnet50", "resnet50", "attention none"), ("bert-large-seq384", "bertl", "eager attention"),
              ("bert-base-seq384", "bertb", "eager attention")]
    tf32 = "fp32 with TF32 allowed (NGC default, ASSUMED)"
    for dev, name, batches, one, eight in table:
        for i, (model, short, att) in enumerate(models):
            base = f"lambda-{short}-{dev.lower()}-1gpu-fp32"
            out.append(row(base, model, dev, batches[i], one[i], LAMBDA, "amp",
                           f"{name}, 1 GPU, {tf32 if dev != 'V100' else 'fp32'}, NGC 22.09, DeepLearningExamples script, "
                           f"{att}", precision="fp32", tf32=dev in TF32))
            if eight and i < 2:
                p2p_words, intra = p2p_disabled(dev)
                out.append(row(f"lambda-{short}-{dev.lower()}-8gpu-fp32", model, dev, batches[i], eight[i], LAMBDA,
                               "amp", f"8 x {name}, DDP, {tf32 if dev != 'V100' else 'fp32'}, NGC 22.09, per-GPU batch "
                               f"as 1 GPU, {att}{p2p_words}", gpus=8, scaling_base=base, precision="fp32",
                               tf32=dev in TF32, intra=intra))
    return out


def dle_rows():
    rn = "ResNet-50 v1.5, AMP, NHWC, batch 256 per GPU (configs.yml), PyTorch data loader, NGC 21.03"
    out = [row("dle-rn50-a100-80gb-1gpu", "resnet50", "A100-80GB", 256, 2470, DLE, "amp", "DGX A100 80GB, 1 GPU, " + rn),
           row("dle-rn50-a100-80gb-8gpu", "resnet50", "A100-80GB", 256, 16621, DLE, "amp", "DGX A100 80GB, 8 GPUs, " + rn,
               gpus=8, scaling_base="dle-rn50-a100-80gb-1gpu"),
           row("dle-rn50-v100-1gpu", "resnet50", "V100", 256, 1200, DLE, "amp", "DGX-1 V100 16GB, 1 GPU, " + rn),
           row("dle-rn50-v100-8gpu", "resnet50", "V100", 256, 8322, DLE, "amp", "DGX-1 V100 16GB, 8 GPUs, " + rn,
               gpus=8, scaling_base="dle-rn50-v100-1gpu")]
    pre = "BERT-Large pre-training (LAMB, fused kernels), mixed precision, NGC 21.11"
    for seq, model, mb, acc, one, eight in [(128, "bert-large-seq128", 256, 32, 580, 4591),
                                            (512, "bert-large-seq512", 32, 128, 210, 1657)]:
        base = f"dle-bert-pretrain-{seq}-a100-80gb-1gpu"
        out.append(row(base, model, "A100-80GB", mb, one, DLE, "tuned",
                       f"DGX A100 80GB, 1 GPU, {pre}, sequence {seq}, batch {mb} x {acc} accumulation",
                       accumulation=acc))
        out.append(row(f"dle-bert-pretrain-{seq}-a100-80gb-8gpu", model, "A100-80GB", mb, eight, DLE, "tuned",
                       f"DGX A100 80GB, 8 GPUs, {pre}, sequence {seq}, batch {mb} x {acc} accumulation",
                       accumulation=acc, gpus=8, scaling_base=base))
    sq = "BERT-Large SQuAD v1.1 fine-tuning, sequence 384, mixed precision, NGC 21.11"
    out += [row("dle-squad-a100-80gb-1gpu", "bert-large-seq384", "A100-80GB", 32, 110.5, DLE, "amp",
                f"DGX A100 80GB, 1 GPU, {sq}, batch 32"),
            row("dle-squad-a100-80gb-8gpu", "bert-large-seq384", "A100-80GB", 32, 846.7, DLE, "amp",
                f"DGX A100 80GB, 8 GPUs, {sq}, batch 32", gpus=8, scaling_base="dle-squad-a100-80gb-1gpu"),
            row("dle-squad-v100-1gpu", "bert-large-seq384", "V100", 16, 52, DLE, "amp",
                f"DGX-1 V100 32GB (taken as the V100: same die and peak, ASSUMED), 1 GPU, {sq}, batch 16",
                memory_gib=32.0),
            row("dle-squad-v100-8gpu", "bert-large-seq384", "V100", 16, 382, DLE, "amp",
                f"DGX-1 V100 32GB, 8 GPUs, {sq}, batch 16", gpus=8, scaling_base="dle-squad-v100-1gpu",
                memory_gib=32.0)]
    return out


def titan_rows():
    out = []
    words = ("Llama 3.1 8B, FSDP, bf16, local batch 2, selective activation checkpointing (counted as none: ASSUMED), "
             "SDPA attention, H100 96GB HBM2e at 500 W (peak taken as H100 SXM's: ASSUMED; the page says the true peak "
             "lies between SXM and NVL), 400 Gb/s RDMA per GPU")
    for gpus, eager, compiled in [(8, 5762, 6667), (128, 5605, 6514)]:
        for stack, tps in [("amp", eager), ("compile", compiled)]:
            base = f"titan-llama3-8b-h100-8gpu-{stack}"
            rid = f"titan-llama3-8b-h100-{gpus}gpu-{stack}"
            out.append(row(rid, "llama3.1-8b-8k", "H100", 2, tps * gpus / 8192, TITAN, stack,
                           f"{gpus} GPUs, {'torch.compile' if stack == 'compile' else 'eager'}, {tps:,} tokens/s/GPU, "
                           + words, gpus=8, nodes=gpus // 8, attention="fused", strategy="fsdp", inter_gbps=3200.0,
                           precision="bf16", scaling_base=base if gpus > 8 else None, memory_gib=96.0))
    return out


def neuron_rows():
    return [row("neuron-llama3.1-8b-trn1-32nodes", "llama3.1-8b-8k", "Trainium1", 1, 47.95, NEU_DEC, "tuned",
                "32 x trn1.32xlarge, TP=32 DP=32 ZeRO-1 (the data-parallel groups counted as ddp: ZeRO-1's sharded "
                "optimizer state is not modelled, ASSUMED), autocast bf16, AdamW, microbatch 1, global batch 1024, "
                "sequence 8192, Neuron 2.24", gpus=32, nodes=32, attention="fused", inter_gbps=800.0,
                precision="bf16", tensor_parallel=32)]


def timm_cnn_rows(conditions):
    # timm results/benchmark-train-amp-nchw-pt112-cu113-rtx3090.csv: train_samples_per_sec, train_batch_size
    return [row(f"timm-{m}-rtx3090", m, "RTX3090", b, sps, "timm_rtx3090", "amp", conditions, attention="fused")
            for m, sps, b in [("resnet18", 2764.22, 512), ("resnet34", 1622.41, 512), ("resnet50", 826.06, 512),
                              ("resnet101", 568.98, 256), ("resnet152", 370.08, 192)]]


def more_rows(timm_conditions):
    return lambda_rows() + lambda_fp32_rows() + dle_rows() + titan_rows() + neuron_rows() + timm_cnn_rows(timm_conditions)
