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
# torch is imported inside the functions that make data or read checkpoints, not at the top: every pytest process
# (each xdist worker) collects this file, and a top-level import cost each ~2 s of CPU for nothing

from tests.support.entrypoint_helpers import (RESUME_RE, TRAIN_DDP, TRAIN_LM, checkpoint_steps, clean_env, final_hash,
                                              run_to_end, sharded_checkpoint_steps, start, torchrun_cmd)


STEPS, EVERY, RESUME_AT = 12, 4, 4
DATA_RE = re.compile(r"^trainctl data rank=(\d) source=(.+?) samples_read=(\d+) total_read=(\d+)", re.M)


def _png(shade: int, generator) -> bytes:
    import torch
    from PIL import Image

    pixels = (torch.rand(20, 24, 3, generator=generator) * 40 + shade).to(torch.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels.numpy()).save(out, format="PNG")
    return out.getvalue()


def image_folder(root):
    """24 tiny images, 3 classes of 8: 3 global batches of 2 ranks x 4 per epoch."""
    import torch
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
    # ids past 255 in a 5,000 vocabulary: uint16 files that need it, without a 50,000-wide output layer's CPU
    cycle = (np.arange(97, dtype=np.uint32) * 509) % 5000
    np.save(root / "part-000.npy", np.tile(cycle, 30).astype(np.uint32))
    np.tile(cycle[::-1], 40).astype(np.uint16).tofile(root / "part-001.bin")
    return root


def vit(ckpt, data) -> tuple[list[str], dict]:
    cmd = torchrun_cmd(TRAIN_DDP, ["--model", "vit_micro", "--batch-size", "4", "--steps", str(STEPS), "--lr", "1e-3",
                                   "--seed", "1", "--log-every", "4", "--checkpoint-every", str(EVERY), "--keep", "5",
                                   "--device", "cpu", "--data-workers", "0", "--checkpoint-dir", str(ckpt)])
    return cmd, clean_env(SM_CHANNEL_TRAIN=str(data))


def lm(ckpt, data) -> tuple[list[str], dict]:
    cmd = torchrun_cmd(TRAIN_LM, ["--preset", "tiny", "--vocab-size", "5000", "--batch-size", "4", "--steps",
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
    import torch
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
    import torch
    data = token_shards(tmp_path / "train")
    reference, resumed, ckpt = interrupted_then_resumed(
        lm, data, tmp_path, sharded_checkpoint_steps, lambda ckpt, step: shutil.rmtree(ckpt / f"step-{step:010d}"))
    assert _reads(reference) == {0: ("2 token shards", STEPS * 4, STEPS * 4), 1: ("2 token shards", STEPS * 4,
                                                                                STEPS * 4)}
    assert _reads(resumed)[0] == ("2 token shards", (STEPS - RESUME_AT) * 4, STEPS * 4)
    # The position in the data is in the checkpoint: 12 steps of 2 ranks x 4 sequences, and the files it indexes.
    saved = torch.load(ckpt / f"step-{STEPS:010d}" / "extra.pt", weights_only=True)["data"]
    assert [entry["read"] for entry in saved] == [STEPS * 8] * 2
    assert saved[0]["files"] == [["part-000.npy", 97 * 30], ["part-001.bin", 97 * 40]]
    # The same checkpoint on other token files: refused in one line, not resumed at a position they do not have.
    other = tmp_path / "other"
    shutil.copytree(data, other)
    np.arange(500, dtype=np.uint16).tofile(other / "part-002.bin")
    code, text = run_to_end(*_cmd_env(lm, ckpt, other, tmp_path / "other.txt"))
    assert code != 0
    assert ("trainctl: " + str(other) + " is not the data the checkpoint was reading (3 files, 7290 tokens now, "
            "2 files, 6790 tokens then)") in text


def _two_hosts(tmp_path, make_args, channels) -> list[tuple[int, str]]:
    """Two hosts of one rank each, as two torchrun agents (static rendezvous on loopback), each with its own `train`
    channel folder described as SageMaker describes a ShardedByS3Key channel: (exit code, log) of each host."""
    import json
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = json.dumps({"train": {"TrainingInputMode": "File", "S3DistributionType": "ShardedByS3Key",
                                   "RecordWrapperType": "None"}})
    jobs = []
    for host, data in enumerate(channels):
        cmd = [*torchrun_cmd(TRAIN_DDP, [])[:3], "--nnodes=2", f"--node-rank={host}", "--nproc-per-node=1",
               "--master-addr=127.0.0.1", f"--master-port={port}", str(TRAIN_DDP),
               *make_args(tmp_path / f"ckpt{host}")]
        jobs.append(start(cmd, tmp_path / f"host{host}.txt",
                          clean_env(SM_CHANNEL_TRAIN=str(data), SM_INPUT_DATA_CONFIG=config)))
    return [(job.wait(), job.text()) for job in jobs]


def test_on_a_sharded_channel_each_host_trains_on_its_own_files_with_the_job_s_labels_and_the_same_epochs(
        tmp_path):
    """Host 0 holds 12 images of classes a, b, c; host 1 holds 8 of a and c only (its share has no b). Each host's
    rank takes its batches from its own files alone, labels are the job's (3 classes on both, or DDP would refuse
    the two models), and an epoch is the smaller host's 2 batches of 4, so both hosts are at the same place."""
    import torch
    generator = torch.Generator().manual_seed(0)
    channels = []
    for host, classes in enumerate((("a", "b", "c"), ("a", "c"))):
        root = tmp_path / f"host{host}" / "train"
        for label in classes:
            (root / label).mkdir(parents=True)
            for i in range(4):
                (root / label / f"{host}-{i}.png").write_bytes(_png(30 + 90 * "abc".index(label), generator))
        channels.append(root)

    def args(ckpt):
        return ["--model", "vit_micro", "--batch-size", "4", "--steps", "6", "--seed", "1", "--log-every", "3",
                "--device", "cpu", "--data-workers", "0", "--checkpoint-dir", str(ckpt)]

    (code0, text0), (code1, text1) = _two_hosts(tmp_path, args, channels)
    assert code0 == 0 and code1 == 0, text0[-3000:] + text1[-3000:]
    assert "trainctl data rank=0 source=image folder, host 0's shard samples_read=24 total_read=24 epoch=3 " \
           "batch=0 dataset_samples=12" in text0
    assert "trainctl data rank=1 source=image folder, host 1's shard samples_read=24 total_read=24 epoch=3 " \
           "batch=0 dataset_samples=8" in text1
    final_hash(text0)
    (path,) = (tmp_path / "ckpt1").glob("ckpt-*.pt")
    saved = torch.load(path, weights_only=False)["data"]
    assert [(p["host"], p["samples"], p["epoch"], p["batch"]) for p in saved] == [(0, 12, 3, 0), (1, 8, 3, 0)]
