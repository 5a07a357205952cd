"""The shared, device-independent part of the training scripts (trainctl_common.py), in-process,
plus one SageMaker-shaped run of train_ddp.py from a copy of the shipped folder."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest

from tests.support.entrypoint_helpers import (
    ENTRYPOINTS, REPO, Lazy, checkpoint_steps, clean_env, final_hash, import_common, run_to_end,
)

# Loaded by the first test that uses them, not when the file is collected (tests/support/entrypoint_helpers.Lazy)
torch = Lazy(lambda: pytest.importorskip("torch"))
common = Lazy(import_common)
if str(ENTRYPOINTS) not in sys.path:  # the scripts' sibling modules, as they import each other (imports nothing now)
    sys.path.insert(0, str(ENTRYPOINTS))


def parse(argv, env=None):
    parser = common.build_parser("test", devices=("cuda", "xla", "cpu"))
    return common.parse_args(parser, argv, env=env or {})


# ---- packaging --------------------------------------------------------------------------------

def test_the_cli_package_never_imports_torch():
    code = ("import sys, trainctl, trainctl.entrypoints; "
            "assert 'torch' not in sys.modules, 'torch imported'; "
            "print(trainctl.entrypoints.ENTRYPOINTS_DIR)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, check=True)
    assert out.stdout.strip() == str(ENTRYPOINTS)


def test_the_folder_ships_its_requirements():
    lines = [line.strip() for line in (ENTRYPOINTS / "requirements.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert any(line.startswith("timm") for line in lines)
    assert not any(line.startswith("torch") for line in lines), "the AWS images bring torch"


# ---- arguments ----------------------------------------------------------------------------------

def test_sagemaker_style_hyperparameters_are_accepted():
    # SageMaker hands every hyperparameter over as a string, keys as the user spelled them.
    args = parse(["--batch_size", "128", "--lr", "0.001", "--bf16", "True", "--steps", "10",
                  "--checkpoint-every", "5", "--keep", "2", "--log_every", "1"])
    assert (args.batch_size, args.lr, args.bf16, args.steps) == (128, 0.001, True, 10)
    assert (args.checkpoint_every, args.keep, args.log_every) == (5, 2, 1)
    assert parse(["--bf16", "false"]).bf16 is False
    assert parse(["--model", '"vit_micro"', "--steps=7"]).model == "vit_micro"
    assert parse(["--steps=7"]).steps == 7
    with pytest.raises(SystemExit):
        parse(["--bf16", "maybe"])
    with pytest.raises(SystemExit):
        parse(["--batch-size", "0"])


def test_defaults_on_sagemaker_and_elsewhere():
    sagemaker = {"SM_MODEL_DIR": "/opt/ml/model", "SM_CHANNEL_TRAIN": "/opt/ml/input/data/train",
                 "SM_CURRENT_HOST": "algo-1", "SM_HOSTS": '["algo-1", "algo-2"]'}
    args = parse([], env=sagemaker)
    assert args.checkpoint_dir == "/opt/ml/checkpoints"
    assert args.model_dir == "/opt/ml/model"
    assert args.data_dir == "/opt/ml/input/data/train"
    assert parse(["--checkpoint-dir", "none"], env=sagemaker).checkpoint_dir is None
    assert parse(["--checkpoint-dir", "/x"], env=sagemaker).checkpoint_dir == "/x"

    local = parse([], env={})
    assert (local.checkpoint_dir, local.model_dir, local.data_dir) == (None, None, None)
    assert local.model == "vit_base_patch16_224" and local.device is None
    assert local.warmup_steps == 100  # steps / 10 by default

    summary = common.platform_summary(sagemaker)
    assert summary["platform"] == "sagemaker" and summary["hosts"] == '["algo-1","algo-2"]'


# ---- checkpoints ------------------------------------------------------------------------------------

def payload(step: int) -> dict:
    return {"format": common.CHECKPOINT_FORMAT, "step": step, "model": {"w": torch.full((64,), step)},
            "optimizer": {}, "scheduler": {}, "rng": []}


def test_checkpoints_are_atomic_named_by_digest_and_only_the_last_k_kept(tmp_path):
    store = common.CheckpointStore(str(tmp_path), keep=2)
    for step in (1, 2, 3):
        path = store.save(step, payload(step))
        assert common.CHECKPOINT_RE.match(os.path.basename(path))
        assert common.file_sha256(path).startswith(path.rsplit("-", 1)[1][:16])
    assert store.steps() == [3, 2]
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p) for _, p in store.entries())
    loaded, _ = store.load(3)
    assert torch.equal(loaded["model"]["w"], torch.full((64,), 3))
    # A step saved again (after a resume) keeps both files; the newer one is loaded.
    os.utime(path, (1, 1))  # file times are coarse: make "older" unambiguous
    store.save(3, payload(3) | {"extra": 1})
    assert [step for step, _ in store.entries()] == [3, 3, 2]
    assert store.load(3)[0].get("extra") == 1
    store.save(4, payload(4))
    assert store.steps() == [4, 3] and len(store.entries()) == 3


def test_broken_files_do_not_load_and_temp_files_are_never_candidates(tmp_path):
    store = common.CheckpointStore(str(tmp_path), keep=5)
    good = store.save(1, payload(1))
    truncated = store.save(2, payload(2))
    damaged = store.save(3, payload(3))
    with open(truncated, "r+b") as handle:
        handle.truncate(os.path.getsize(truncated) // 2)
    data = bytearray(open(damaged, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(damaged, "wb").write(bytes(data))
    for name in (".ckpt-0000000004.host-1.tmp", "ckpt-0000000005.pt", "notes.txt"):
        (tmp_path / name).write_bytes(b"junk")

    assert store.steps() == [3, 2, 1]
    for step in (2, 3):
        with pytest.raises(ValueError, match="does not match the name"):
            store.load(step)
    assert store.load(1)[1] == good
    store.remove_stale_temp_files()
    assert not (tmp_path / ".ckpt-0000000004.host-1.tmp").exists()
    store.set_aside(3)
    assert store.steps() == [2, 1]


def test_state_hash_is_order_independent_and_sensitive():
    a = {"x": torch.arange(4, dtype=torch.bfloat16), "y": {1: torch.tensor(2.0)}, "lr": 0.1}
    b = {"lr": 0.1, "y": {1: torch.tensor(2.0)}, "x": torch.arange(4, dtype=torch.bfloat16)}
    assert common.state_sha256(a) == common.state_sha256(b)
    b["y"][1] = torch.tensor(2.0000002)
    assert common.state_sha256(a) != common.state_sha256(b)
    assert common.state_sha256({"x": torch.zeros(2)}) != common.state_sha256({"x": torch.zeros(1, 2)})


def test_rng_state_round_trips_through_a_checkpoint(tmp_path):
    ops = CpuOps()
    common.seed_host_rngs(7)
    state = common.capture_rng(ops)
    expected = (__import__("random").random(), __import__("numpy").random.rand(), torch.rand(1))
    store = common.CheckpointStore(str(tmp_path), keep=1)
    store.save(1, payload(1) | {"rng": [state]})
    common.seed_host_rngs(99)
    common.restore_rng(store.load(1)[0]["rng"][0], ops)
    again = (__import__("random").random(), __import__("numpy").random.rand(), torch.rand(1))
    assert expected[:2] == again[:2] and torch.equal(expected[2], again[2])


# ---- data -----------------------------------------------------------------------------------------

def CpuOps():  # noqa: N802 - stands for the class, which subclasses a script's class and so is made on first use
    class CpuOps(common.DeviceOps):
        """One CPU process: no process group to start."""

        def setup(self, ctx):
            pass

        def random_stream(self, seed):
            generator = torch.Generator().manual_seed(seed)
            return lambda shape: torch.randn(shape, generator=generator)

    return CpuOps()


def test_synthetic_batches_are_reproducible_per_step_and_rank_and_learnable():
    task = common.SyntheticTask(seed=3, num_classes=10, image_size=32, ops=CpuOps())
    images, labels = task.batch(step=5, rank=1, batch_size=256)
    again_images, again_labels = task.batch(step=5, rank=1, batch_size=256)
    assert torch.equal(images, again_images) and torch.equal(labels, again_labels)
    assert not torch.equal(images, task.batch(step=5, rank=0, batch_size=256)[0])
    assert not torch.equal(images, task.batch(step=6, rank=1, batch_size=256)[0])
    # The label is a function of the image alone...
    assert torch.equal(labels, task.labels_for(images))
    # ...and it is the class whose pattern was planted, so there is something to learn.
    draw = CpuOps().random_stream(common.mix_seed(3, "data", 5, 1))
    planted = draw((256, 10)).argmax(dim=1)
    assert (planted == labels).float().mean() > 0.99
    assert len(set(labels.tolist())) == 10


def test_epoch_sampler_shards_disjointly_and_resumes_mid_epoch():
    def shard(rank, start=0):
        return list(common.ShardedEpochSampler(size=103, seed=1, epoch=2, rank=rank, world_size=2,
                                               batch_size=5, start_batch=start))
    zero, one = shard(0), shard(1)
    assert len(zero) == len(one) == 50 and not set(zero) & set(one)
    assert shard(0, start=3) == zero[15:]
    other_epoch = list(common.ShardedEpochSampler(103, 1, 3, 0, 2, 5, 0))
    assert other_epoch != zero


def test_a_sharded_train_channel_is_told_by_the_platform_s_input_data_config(tmp_path):
    import json

    train = tmp_path / "data" / "train"
    train.mkdir(parents=True)
    sharded = {"train": {"TrainingInputMode": "File", "S3DistributionType": "ShardedByS3Key"}}
    env = {"SM_CHANNEL_TRAIN": str(train), "SM_INPUT_DATA_CONFIG": json.dumps(sharded)}
    assert parse([], env=env).data_sharded
    # ...or the file in SM_INPUT_CONFIG_DIR, as SageMaker and trainctl's EC2 agent write it
    config = tmp_path / "config"
    config.mkdir()
    (config / "inputdataconfig.json").write_text(json.dumps(sharded))
    assert parse([], env={"SM_CHANNEL_TRAIN": str(train), "SM_INPUT_CONFIG_DIR": str(config)}).data_sharded
    replicated = {"train": {"S3DistributionType": "FullyReplicated"}}
    assert not parse([], env={**env, "SM_INPUT_DATA_CONFIG": json.dumps(replicated)}).data_sharded
    # another folder than the channel is the user's own data, whole on every host
    assert not parse(["--data-dir", str(tmp_path)], env=env).data_sharded
    assert not parse([], env={}).data_sharded


def test_an_epoch_can_be_cut_to_the_smallest_host_s_batches():
    whole = list(common.ShardedEpochSampler(40, 1, 0, 1, 2, 4, 0))   # 5 batches of 4 for rank 1 of 2
    capped = list(common.ShardedEpochSampler(40, 1, 0, 1, 2, 4, 0, batches=3))
    assert len(whole) == 20 and capped == whole[:12]
    assert list(common.ShardedEpochSampler(40, 1, 0, 1, 2, 4, 1, batches=3)) == whole[4:12]


def test_a_host_s_share_of_an_image_folder_takes_the_job_s_labels(tmp_path):
    import trainctl_data
    from PIL import Image

    for name in ("a", "c"):   # this host's share holds no image of class b
        (tmp_path / name).mkdir()
        Image.new("RGB", (4, 4)).save(tmp_path / name / "0.png")
    assert trainctl_data.job_classes([["a", "b", "c"], ["a", "c"]]) == ["a", "b", "c"]
    assert trainctl_data.job_classes([3, 5]) == 5
    with pytest.raises(SystemExit, match="one kind of data"):
        trainctl_data.job_classes([3, ["a"]])
    data, classes, _ = trainctl_data.open_images(str(tmp_path), lambda image: image, classes=["a", "b", "c"])
    assert classes == 3 and [label for _, label in data.samples] == [0, 2] and data[1][1] == 2
    assert trainctl_data.open_images(str(tmp_path), lambda image: image)[1] == 2   # not sharded: the folder's own


def test_stop_signal_is_idempotent_and_takes_over_early_signals():
    stop = common.StopSignal()
    previous = signal.getsignal(signal.SIGTERM)
    try:
        stop.install((signal.SIGTERM,), early=[signal.SIGTERM])
        assert stop.requested and stop.signal_name == "SIGTERM"
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.signal_name == "SIGTERM"
    finally:
        signal.signal(signal.SIGTERM, previous)


# ---- one SageMaker-shaped run ------------------------------------------------------------------------

def test_sagemaker_layout_with_an_image_folder_and_string_hyperparameters(tmp_path):
    from PIL import Image

    # What the container does: sourcedir.tar.gz's contents in /opt/ml/code, the script run by
    # path, so only the sibling trainctl_common.py is importable (no trainctl package).
    code = tmp_path / "code"
    code.mkdir()
    # The whole folder but __init__.py, as the SageMaker packer ships it.
    for path in ENTRYPOINTS.iterdir():
        if path.is_file() and path.name != "__init__.py" and path.suffix in (".py", ".txt"):
            shutil.copy(path, code / path.name)
    data = tmp_path / "train"
    generator = torch.Generator().manual_seed(0)
    for label, shade in (("cats", 40), ("dogs", 200)):
        (data / label).mkdir(parents=True)
        for index in range(8):
            pixels = (torch.rand(40, 48, 3, generator=generator) * 50 + shade).to(torch.uint8)
            Image.fromarray(pixels.numpy()).save(data / label / f"{index}.png")
    env = clean_env(SM_MODEL_DIR=str(tmp_path / "model"), SM_CHANNEL_TRAIN=str(data),
                    SM_CURRENT_HOST="algo-1", SM_HOSTS='["algo-1"]', SM_NUM_GPUS="0",
                    SM_NUM_NEURONS="0", PYTHONPATH="")
    argv = [sys.executable, "train_ddp.py", "--model", "vit_micro", "--batch_size", "4",
            "--steps", "6", "--log_every", "3", "--bf16", "true", "--data_workers", "0",
            "--checkpoint-dir", str(tmp_path / "ckpt"), "--checkpoint_seconds", "0.001",
            "--keep", "2"]
    code_rc, text = run_to_end(argv, tmp_path / "log.txt", env=env, cwd=code)
    assert code_rc == 0, text[-4000:]
    assert "platform=sagemaker host=algo-1" in text
    assert "trainctl step=6 " in text
    final_hash(text)
    saved = torch.load(tmp_path / "model" / "model.pt", weights_only=True)
    assert saved["model"] == "vit_micro" and saved["num_classes"] == 2
    assert saved["state_dict"]["head.weight"].shape[0] == 2
    # A step takes longer than 1 ms, so the time trigger fires at every step boundary.
    assert checkpoint_steps(tmp_path / "ckpt") == [5, 6]
    assert "trainctl checkpoint step=1 " in text


def test_a_full_checkpoint_disk_names_the_device_and_the_last_good_checkpoint(tmp_path):
    import socket

    store = common.CheckpointStore(str(tmp_path), keep=5)  # loads the scripts' modules (and puts them on the path)
    import trainctl_checkpoint

    for step in (1, 2):
        store.save(step, payload(step))
    # the next save's temp file writes to /dev/full: every write fails with ENOSPC, as on a full disk
    temp = tmp_path / f".ckpt-{3:010d}.{socket.gethostname()}-{os.getpid()}.tmp"
    os.symlink("/dev/full", temp)
    with pytest.raises(trainctl_checkpoint.CheckpointDiskFull) as raised:
        store.save(3, payload(3))
    assert str(raised.value).startswith("no space left on /")
    assert str(raised.value).endswith("; the last good checkpoint is step 2")
    assert store.steps() == [2, 1] and not temp.exists()


# ---- the LM's token stream and its position in the data ----------------------------------------------------------

def _token_files(root, sizes=(3000, 2000)):
    import numpy as np

    root.mkdir(parents=True, exist_ok=True)
    for index, size in enumerate(sizes):
        np.save(root / f"part-{index}.npy", (np.arange(size, dtype=np.uint32) * 7 + index) % 1000)
    return sorted(str(path) for path in root.iterdir())


def _tokens(paths, rank=0, world=1, per_rank_step=4, local=None, sharded=False, seq_len=16):
    from trainctl_lm_data import TokenShards

    ctx = common.DistContext(rank=rank, world_size=world, local_rank=rank % (local or world),
                             local_world_size=local or world)
    # a step's samples: every rank's (a host's ranks' on a sharded channel)
    return TokenShards(paths, "uint16", 5, 1000, seq_len, torch.device("cpu"), ctx,
                       per_rank_step * ctx.local_world_size if sharded else per_rank_step * world, sharded)


def test_a_step_takes_the_same_token_windows_however_the_ranks_and_micro_batches_split_it(tmp_path):
    paths = _token_files(tmp_path)
    # 8 sequences per step, 2 chunks of 4: one each on 2 ranks, or both on 1 rank (trainctl_elastic.py)
    two = [_tokens(paths, rank, 2, per_rank_step=4).batch(3, rank, 4) for rank in (0, 1)]
    one = _tokens(paths, 0, 1, per_rank_step=8)
    assert torch.equal(torch.cat(two), torch.cat([one.batch(3, chunk, 4) for chunk in (0, 1)]))
    assert torch.equal(one.rows(24, 8), torch.cat(two))   # step 3 of 8 a step: samples 24..31 of the stream
    assert not torch.equal(one.rows(0, 8), one.rows(8, 8))


def test_the_lm_resumes_at_the_saved_position_even_with_another_batch_size(tmp_path):
    paths = _token_files(tmp_path)
    first = _tokens(paths, per_rank_step=8)
    saved = [first.position(5)]                     # 5 steps of 8: 40 samples taken
    assert saved[0]["read"] == 40 and saved[0]["files"] == [["part-0.npy", 3000], ["part-1.npy", 2000]]
    resumed = _tokens(paths, per_rank_step=2)       # a quarter of the tokens per step
    resumed.start(5, saved)
    assert torch.equal(resumed.batch(5, 0, 2), first.rows(40, 2))
    assert torch.equal(resumed.batch(6, 0, 2), first.rows(42, 2))
    assert resumed.position(7)["read"] == 44
    fresh = _tokens(paths, per_rank_step=2)
    fresh.start(5, None)                             # no position saved: the step's
    assert fresh.read_at(5) == 10


def test_the_lm_refuses_to_resume_on_other_token_files_or_another_sequence_length(tmp_path):
    saved = [_tokens(_token_files(tmp_path / "a")).position(5)]
    other = _tokens(_token_files(tmp_path / "b", sizes=(3000, 2500)))
    with pytest.raises(SystemExit, match=r"is not the data the checkpoint was reading \(2 files, 5500 tokens "
                                         r"now, 2 files, 5000 tokens then\)") as refused:
        other.start(5, saved)
    assert "\n" not in str(refused.value)
    with pytest.raises(SystemExit, match="windows are 16 tokens long, this run's 32"):
        _tokens(_token_files(tmp_path / "a"), seq_len=32).start(5, saved)


def test_on_a_sharded_channel_each_host_s_ranks_split_the_host_s_own_stream(tmp_path):
    paths = _token_files(tmp_path)
    # 2 hosts x 2 ranks: rank 3 is host 1's second rank
    host1 = [_tokens(paths, rank, 4, per_rank_step=4, local=2, sharded=True) for rank in (2, 3)]
    assert [t.host for t in host1] == [1, 1] and host1[0].kind == "2 token shards, host 1's shard"
    own = _tokens(paths, 2, 4, per_rank_step=8, local=2, sharded=True)   # one rank's view of host 1's stream
    assert torch.equal(torch.cat([t.batch(2, t.ctx.local_rank, 4) for t in host1]), own.rows(16, 8))
    host0 = _tokens(paths, 0, 4, per_rank_step=4, local=2, sharded=True)
    assert not torch.equal(host0.batch(2, 0, 4), host1[0].batch(2, 0, 4))
    assert host1[0].position(2) == {"read": 16, "host": 1, "files": host1[0].files(), "seq_len": 16}
