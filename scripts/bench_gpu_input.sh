#!/usr/bin/env bash
# GPU benchmark: the bundled ViT entrypoint on a real image folder (the `train` channel) against its on-device
# synthetic data, with 4, 8 and 16 DataLoader workers, and the CPU cost per JPEG the planner uses measured on the
# same host (scripts/bench_input.py). Run on a GPU machine from the repository root; writes logs to ${OUT:-/tmp/out}.
set -euo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 - <<'PY'
# 4,000 JPEGs of ImageNet's typical size (500x375, quality 90, a textured gradient as bench_input.py), 10 classes
import os
from concurrent.futures import ProcessPoolExecutor
import numpy as np
from PIL import Image

def make(i):
    rng = np.random.default_rng(i)
    y, x = np.mgrid[0:375, 0:500]
    base = np.stack([(x * 255 / 500 + i) % 256, (y * 255 / 375), ((x + y + i) % 256)], axis=-1)
    img = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
    d = f"/tmp/imgs/c{i % 10}"
    os.makedirs(d, exist_ok=True)
    Image.fromarray(img).save(f"{d}/{i:05d}.jpg", quality=90)

with ProcessPoolExecutor(16) as ex:
    list(ex.map(make, range(4000), chunksize=50))
print("images:", sum(len(f) for _, _, f in os.walk("/tmp/imgs")), "bytes:",
      sum(os.path.getsize(os.path.join(r, n)) for r, _, fs in os.walk("/tmp/imgs") for n in fs))
PY
python3 scripts/bench_input.py | tee "$OUT/bench_input.json"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
nproc | tee -a "$OUT/gpu.txt"
run() {  # name, then extra arguments
  local name=$1; shift
  (cd trainctl/entrypoints && timeout 240 torchrun --standalone --nproc_per_node 1 train_ddp.py \
     --model vit_base_patch16_224 --batch-size 128 --steps 90 --log-every 10 "$@") > "$OUT/$name.log" 2>&1 || true
  echo "== $name"; grep -E "samples_per_s|mfu|Error|error" "$OUT/$name.log" | tail -4 || tail -5 "$OUT/$name.log"
}
run synthetic
for w in 4 8 16; do SM_CHANNEL_TRAIN=/tmp/imgs run "jpeg-workers-$w" --data-workers "$w"; done
