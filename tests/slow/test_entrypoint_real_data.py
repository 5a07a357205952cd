"""The bundled scripts on a real dataset in their `train` channel, under real `torchrun --nproc_per_node=2` (CPU,
gloo): an image folder and the same images as WebDataset-style tar shards for the ViT, .npy and .bin token shards
for the LM.

Each dataset is trained once uninterrupted; then the run is interrupted after an early checkpoint (the later
checkpoints removed, as if the instance had gone then) and resumed: it must end in the very same final state, and
each rank must say how many samples it read. The data position (epoch, batch, samples read) is in the checkpoint.
"""

from __future__ import annotations

import io
import re
import shutil
import tarfile

import numpy as np
import pytest
import torch

from tests.support.entrypoint_helpers import (RESUME_RE, TRAIN_DDP, TRAIN_LM, checkpoint_steps, clean_env, final_hash,
                                              run_to_end, sharded_checkpoint_steps, torchrun_cmd)

pytestmark = pytest.mark.slow

STEPS, EVERY, RESUME_AT = 12, 4, 4
DATA_RE = re.compile(r"^trainctl data rank=(\d) source=(.+?) samples_read=(\d+) total_read=(\d+)", re.M)


def _png(shade: int, generator) -> bytes:
    from PIL import Image

    pixels = (torch.rand(20, 24, 3, generator=generator) * 40 + shade).to(torch.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels.numpy()).save(out, format="PNG")
    return out.getvalue()


def image_folder(root):
    """24 tiny images, 3 classes of 8: 3 global batches of 2 ranks x 4 per epoch."""
    generator = torch.Generator().manual_seed(0)
    for label, shade in (("a", 30), ("b", 120), ("c", 210)):
        (root / label).mkdir(parents=True)
        for i in range(8):
            (root / label / f"{i}.png").write_bytes(_png(shade, generator))
    return root


def tar_shards(root, folder):
    """The folder's very images as 3 WebDataset shards (KEY.png with KEY.cls), in the order ImageFolder indexes them
    (classes, then files, by name): the same dataset, so the same training."""
    root.mkdir()
    files = [(label, path) for label, cls in enumerate(sorted(p.name for p in folder.iterdir()))
             for path in sorted((folder / cls).iterdir())]
    for shard in range(3):
        with tarfile.open(root / f"shard-{shard:04d}.tar", "w") as tar:
            for i, (label, path) in enumerate(files[shard * 8:(shard + 1) * 8]):
                for name, data in ((f"s{shard}-{i:02d}.png", path.read_bytes()),
                                   (f"s{shard}-{i:02d}.cls", str(label).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    return root


def token_shards(root):
    root.mkdir()
    cycle = (np.arange(97, dtype=np.uint32) * 509) % 50000
    np.save(root / "part-000.npy", np.tile(cycle, 30).astype(np.uint32))
    np.tile(cycle[::-1], 40).astype(np.uint16).tofile(root / "part-001.bin")
    return root


def vit(ckpt, data) -> tuple[list[str], dict]:
    cmd = torchrun_cmd(TRAIN_DDP, ["--model", "vit_micro", "--batch-size", "4", "--steps", str(STEPS), "--lr", "1e-3",
                                   "--seed", "1", "--log-every", "4", "--checkpoint-every", str(EVERY), "--keep", "5",
                                   "--device", "cpu", "--data-workers", "0", "--checkpoint-dir", str(ckpt)])
    return cmd, clean_env(SM_CHANNEL_TRAIN=str(data))


def lm(ckpt, data) -> tuple[list[str], dict]:
    cmd = torchrun_cmd(TRAIN_LM, ["--preset", "tiny", "--vocab-size", "50000", "--batch-size", "4", "--steps",
                                  str(STEPS), "--lr", "1e-2", "--seed", "3", "--log-every", "4", "--checkpoint-every",
                                  str(EVERY), "--keep", "5", "--device", "cpu", "--bf16", "false",
                                  "--token-dtype", "uint16", "--checkpoint-dir", str(ckpt)])
    return cmd, clean_env(SM_CHANNEL_TRAIN=str(data))


def interrupted_then_resumed(make, data, tmp_path, steps_of, remove_after) -> tuple[str, str, str]:
    """(uninterrupted log, resumed log, checkpoint folder) of one dataset."""
    ckpt = tmp_path / "ckpt"
    code, reference = run_to_end(*_cmd_env(make, ckpt, data, tmp_path / "reference.txt"))
    assert code == 0, reference[-4000:]
    assert steps_of(ckpt)[-1] == STEPS
    for later in [s for s in steps_of(ckpt) if s > RESUME_AT]:
        remove_after(ckpt, later)   # the instance went after the checkpoint of step RESUME_AT
    code, resumed = run_to_end(*_cmd_env(make, ckpt, data, tmp_path / "resumed.txt"))
    assert code == 0, resumed[-4000:]
    assert RESUME_RE.findall(resumed) == [str(RESUME_AT)]
    assert final_hash(resumed) == final_hash(reference)
    return reference, resumed, ckpt


def _cmd_env(make, ckpt, data, log):
    cmd, env = make(ckpt, data)
    return cmd, log, env


def _remove_full(ckpt, step):
    for path in ckpt.glob(f"ckpt-{step:010d}-*.pt"):
        path.unlink()


def _reads(text: str) -> dict[int, tuple[str, int, int]]:
    return {int(rank): (source, int(read), int(total)) for rank, source, read, total in DATA_RE.findall(text)}


def test_a_vit_interrupted_on_real_images_resumes_on_exactly_the_same_samples(tmp_path):
    data = image_folder(tmp_path / "train")
    reference, resumed, ckpt = interrupted_then_resumed(vit, data, tmp_path, checkpoint_steps, _remove_full)
    per_rank, resumed_reads = STEPS * 4, (STEPS - RESUME_AT) * 4
    assert _reads(reference) == {0: ("image folder", per_rank, per_rank), 1: ("image folder", per_rank, per_rank)}
    assert _reads(resumed) == {0: ("image folder", resumed_reads, per_rank),
                               1: ("image folder", resumed_reads, per_rank)}
    # the position is in the checkpoint: after 4 steps of 3 batches an epoch, epoch 1, batch 1, 16 samples per rank
    (path,) = ckpt.glob(f"ckpt-{RESUME_AT:010d}-*.pt")
    saved = torch.load(path, weights_only=False)["data"]
    assert [(p["epoch"], p["batch"], p["read"], p["samples"]) for p in saved] == [(1, 1, 16, 24)] * 2

    # The same images as tar shards: the same training to the bit, and resumed from the folder run's checkpoint of
    # step 4 (the position is the same whichever reader saved it).
    shards = tar_shards(tmp_path / "shards", data)
    shard_ckpt = tmp_path / "shard-ckpt"
    shard_ckpt.mkdir()
    shutil.copy(path, shard_ckpt / path.name)
    code, text = run_to_end(*_cmd_env(vit, shard_ckpt, shards, tmp_path / "shards.txt"))
    assert code == 0, text[-4000:]
    assert RESUME_RE.findall(text) == [str(RESUME_AT)]
    assert final_hash(text) == final_hash(reference)
    assert _reads(text) == {0: ("3 tar shards", resumed_reads, per_rank), 1: ("3 tar shards", resumed_reads, per_rank)}


def test_the_lm_interrupted_on_npy_and_bin_token_shards_resumes_exactly(tmp_path):
    data = token_shards(tmp_path / "train")
    reference, resumed, _ = interrupted_then_resumed(
        lm, data, tmp_path, sharded_checkpoint_steps, lambda ckpt, step: shutil.rmtree(ckpt / f"step-{step:010d}"))
    assert _reads(reference) == {0: ("2 token shards", STEPS * 4, STEPS * 4), 1: ("2 token shards", STEPS * 4,
                                                                                STEPS * 4)}
    assert _reads(resumed)[0] == ("2 token shards", (STEPS - RESUME_AT) * 4, STEPS * 4)
