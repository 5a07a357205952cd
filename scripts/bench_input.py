"""CPU seconds per training sample for the input pipelines the planner knows (trainctl/perf/input_pipeline.py).

One thread (torch.set_num_threads(1)), as one DataLoader worker runs: the planner divides a node's vCPUs by
these figures. Prints one JSON line per source; docs/cost-model.md records the figures with machine and date.

- cpu-synthetic: `torch.randn(3, 224, 224)` and a label per sample, as the reference experiment's Dataset does.
- jpeg: decode a 500x375 JPEG (ImageNet's typical size, quality 90) with PIL, RandomResizedCrop(224),
  RandomHorizontalFlip, ToTensor, Normalize: torchvision's ImageNet training transform. The test image is a
  smooth gradient with texture, not noise (noise decodes slower than photographs).
"""
from __future__ import annotations

import io
import json
import time


def per_sample_seconds(fn, n: int) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best


def main() -> None:
    import numpy as np
    import torch
    from PIL import Image
    from torchvision import transforms

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    synthetic = per_sample_seconds(lambda: (torch.randn(3, 224, 224, generator=gen), torch.tensor(1)), 300)

    y, x = np.mgrid[0:375, 0:500]
    rng = np.random.default_rng(0)
    base = np.stack([(x * 255 / 500), (y * 255 / 375), ((x + y) % 256)], axis=-1)
    img = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=90)
    data = buf.getvalue()
    train = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                                transforms.ToTensor(),
                                transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])

    def jpeg_sample():
        with Image.open(io.BytesIO(data)) as im:
            return train(im.convert("RGB"))

    jpeg = per_sample_seconds(jpeg_sample, 200)
    print(json.dumps({"cpu-synthetic_s_per_sample": round(synthetic, 6), "jpeg_s_per_sample": round(jpeg, 6),
                      "jpeg_bytes": len(data), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
