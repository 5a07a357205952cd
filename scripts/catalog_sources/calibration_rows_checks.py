"""calibration.json `check_rows`: published rows of models the throughput model cannot represent yet.

Imported by calibration_rows.py. scripts/eval_model.py scores them out of source, beside the headline, and never fits
them (trainctl/catalog CalibrationRow, the same fields as `rows`, with `tf32` always written). Figures typed in from
the README named in SOURCES; conditions the README does not state are marked ASSUMED.
"""
EFFDET = "dle_effdet_readme"
SOURCES = {
  EFFDET: "NVIDIA/DeepLearningExamples PyTorch/Detection/Efficientdet/README.md 'Training performance results', commit "
          "729963dd47e7c8bd462ad10bfac7a7b0b604e6dd: EfficientDet-D0 (512 x 512) on DGX A100 80GB (AMP and TF32) and "
          "DGX-1 V100 32GB (AMP and FP32), 1 and 8 GPUs, images/s averaged over an epoch, 21.06-py3 NGC; batch per GPU "
          "and flags from scripts/D0/train-benchmark_{AMP,TF32}_A100-80G.sh and train-benchmark_{AMP,FP32}_V100-32G.sh "
          "(150, 80, 60, 30; NCHW, SyncBN, fused momentum and focal loss); size: 3.9M parameters and 2.5B "
          "multiply-adds at 512 x 512 (Tan, Pang, Le, 'EfficientDet: Scalable and Efficient Object Detection', CVPR "
          "2020, Table 2; FLOPs there are multiply-adds): "
          "https://github.com/NVIDIA/DeepLearningExamples/tree/729963dd47e7c8bd462ad10bfac7a7b0b604e6dd/PyTorch/"
          "Detection/Efficientdet",
}
WHY = ("Published rows the throughput model cannot represent yet, scored by scripts/eval_model.py out of source and "
       "never fitted: EfficientDet-D0, a detector given by its size (parameters and multiply-adds) whose depthwise "
       "convolutions and BiFPN run at about 1% of the GPU's peak; a CNN given by size is modelled on ResNets (bytes in "
       "proportion to FLOPs)")
# EfficientDet-D0 at 512 x 512: 3.9M parameters, 2.5B multiply-adds (forward FLOPs = 2 x multiply-adds), given by
# size only, as a CNN.
SHAPES = {"efficientdet-d0-512": {"family": "cnn", "params": 3.9e6, "forward_flops": 2 * 2.5e9}}


def effdet_row(device, gpus, precision, batch, sps, machine, words):
    """One README row: `words` is the precision as the README names it (AMP, TF32, FP32)."""
    suffix = "" if precision == "fp16" else "-fp32"
    rid = f"dle-effdet-d0-{device.lower()}-{gpus}gpu{suffix}"
    r = {"id": rid, "model": "efficientdet-d0-512", "device": device, "precision": precision, "micro_batch": batch,
         "accumulation": 1, "nodes": 1, "ranks_per_node": gpus, "strategy": "ddp", "checkpointing": False,
         "attention": "eager", "samples_per_s": float(sps), "source": EFFDET, "stack": "tuned",
         "tf32": True if words == "TF32" else None, **({"memory_gib": 32.0} if "32GB" in machine else {}),
         # NVSwitch A100 200 GB/s, NVLink V100 100 GB/s (the network model's figures)
         "intra_gbytes_s": 200.0 if device == "A100-80GB" else 100.0, "inter_gbps": 0.0, "transport": "efa",
         "conditions": f"{machine}, {'1 GPU' if gpus == 1 else f'{gpus} GPUs'}, EfficientDet-D0 512x512 COCO, {words}, "
                       f"batch {batch} per GPU, NCHW, SyncBN, fused momentum and focal loss, NGC 21.06"
                       + ("; V100 32GB taken as the V100 (same die and peak, ASSUMED)" if device == "V100" else "")}
    if gpus > 1:
        r["scaling_base"] = f"dle-effdet-d0-{device.lower()}-1gpu{suffix}"
    return r


def check_rows():
    out = []
    # (device, machine, precision, the README's word for it, batch per GPU, images/s on 1 GPU, on 8 GPUs)
    for device, machine, precision, words, batch, one, eight in [
            ("A100-80GB", "DGX A100 80GB", "fp16", "AMP", 150, 255, 1835),
            ("A100-80GB", "DGX A100 80GB", "fp32", "TF32", 80, 170, 1213),
            ("V100", "DGX-1 V100 32GB", "fp16", "AMP", 60, 186, 1040),
            ("V100", "DGX-1 V100 32GB", "fp32", "FP32", 30, 110, 613)]:
        out.append(effdet_row(device, 1, precision, batch, one, machine, words))
        out.append(effdet_row(device, 8, precision, batch, eight, machine, words))
    return out
