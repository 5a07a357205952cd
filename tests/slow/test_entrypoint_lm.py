"""train_lm.py (FSDP, sharded DCP checkpoints) under real `torchrun --nproc_per_node=2` on the
CPU (gloo), tiny preset.

One uninterrupted run is the reference; every interrupted-and-resumed run must end in the very
same final_state_sha256 (the full, gathered model and optimizer state, bit for bit).
"""

from __future__ import annotations

import json
import math
import shutil
import signal
import sys

import numpy as np
import pytest

from tests.support.entrypoint_helpers import (
    ENTRYPOINTS, LM_METRIC_RE, MFU_RE, RESUME_RE, STOPPED_RE, TRAIN_LM, alive, clean_env,
    final_hash, kill_tree, rank_pids, run_to_end, sharded_checkpoint_steps, start, torchrun_cmd,
    wait_until,
)


STEPS = 30
ARGS = ["--preset", "tiny", "--batch-size", "4", "--steps", str(STEPS), "--lr", "1e-2",
        "--seed", "3", "--log-every", "10", "--checkpoint-every", "10", "--keep", "2",
        "--device", "cpu", "--bf16", "false", "--peak-tflops", "0.5"]


def lm(checkpoint_dir, *extra: str) -> list[str]:
    return torchrun_cmd(TRAIN_LM, [*ARGS, "--checkpoint-dir", str(checkpoint_dir), *extra])


# session, not module: a worker may interleave this file with others, and a module fixture is then made
# again each time the file comes back (three reference runs instead of one)
@pytest.fixture(scope="session")
def reference(tmp_path_factory):
    """The uninterrupted run: its output, checkpoint folder and final hash."""
    root = tmp_path_factory.mktemp("lm-reference")
    code, text = run_to_end(lm(root / "ckpt"), root / "log.txt")
    assert code == 0, text[-4000:]
    return {"text": text, "dir": root / "ckpt", "hash": final_hash(text)}


def test_short_run_lowers_the_loss_and_reports_tokens_and_mfu(reference):
    text = reference["text"]
    metrics = [(int(s), float(loss), float(tokens)) for s, loss, _, tokens
               in LM_METRIC_RE.findall(text)]
    assert [step for step, _, _ in metrics] == [10, 20, 30], text[-4000:]
    # The tiny preset's vocabulary is 512 tokens: an untrained model is near ln(512) = 6.24.
    first, last = metrics[0][1], metrics[-1][1]
    assert first < 1.1 * math.log(512)
    assert last < 0.75 * first, metrics
    assert all(tokens > 0 for _, _, tokens in metrics)
    mfu = MFU_RE.findall(text)
    assert len(mfu) == 3 and all(float(peak) == 1.0 for _, peak in mfu)  # 0.5 x 2 ranks
    assert "sharding=full" in text and "world_size=2" in text
    # Sharded checkpoints: the last K kept, each complete, nothing half-written left behind.
    assert sharded_checkpoint_steps(reference["dir"]) == [20, 30]
    assert not [p for p in reference["dir"].iterdir() if p.name.endswith(".tmp")]
    newest = reference["dir"] / "step-0000000030"
    manifest = json.loads((newest / "manifest.json").read_text())
    shards = sorted(name for name in manifest["files"] if name.endswith(".distcp"))
    assert len(shards) == 2 and {".metadata", "extra.pt"} <= set(manifest["files"])
    assert sorted(manifest["files"]) == sorted(p.name for p in newest.iterdir()
                                               if p.name != "manifest.json")


def test_sigkill_of_the_whole_job_then_rerun_matches_uninterrupted(reference, tmp_path):
    ckpt = tmp_path / "ckpt"
    job = start(lm(ckpt), tmp_path / "killed.txt")
    wait_until(lambda: sharded_checkpoint_steps(ckpt), "a first complete checkpoint", job)
    assert len(rank_pids(job.proc.pid)) == 2
    killed = kill_tree(job.proc.pid, signal.SIGKILL)
    job.proc.wait()
    wait_until(lambda: not any(alive(pid) for pid in killed), "every killed process to be gone")
    assert "final_state_sha256" not in job.text(), "the job finished before it could be killed"

    code, text = run_to_end(lm(ckpt), tmp_path / "rerun.txt")
    assert code == 0, text[-4000:]
    resumed = [int(step) for step in RESUME_RE.findall(text)]
    assert len(resumed) == 1 and 10 <= resumed[0] < STEPS, text[-4000:]
    assert final_hash(text) == reference["hash"]


def test_corrupt_and_incomplete_newest_checkpoints_are_skipped(reference, tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(reference["dir"], ckpt)
    # The newest: one shard damaged in the middle (DCP alone would read wrong tensors).
    shard = ckpt / "step-0000000030" / "__1_0.distcp"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2:len(data) // 2 + 256] = bytes(256)
    shard.write_bytes(bytes(data))
    # Between it and the good one: a step folder without its manifest (a partial restore).
    incomplete = ckpt / "step-0000000025"
    shutil.copytree(ckpt / "step-0000000020", incomplete)
    (incomplete / "manifest.json").unlink()
    # And what SIGKILL during a save leaves: a temp folder.
    stale = ckpt / ".step-0000000040.somehost-12345.tmp"
    stale.mkdir()
    (stale / "__0_0.distcp").write_bytes(b"half a shard")

    code, text = run_to_end(lm(ckpt), tmp_path / "rerun.txt")
    assert code == 0, text[-4000:]
    assert "skipping checkpoint of step 30" in text and "damaged file" in text
    assert "skipping checkpoint of step 25" in text and "no manifest.json" in text
    assert RESUME_RE.findall(text) == ["20"]
    assert final_hash(text) == reference["hash"]
    assert not stale.exists()
    assert list(ckpt.glob("step-0000000030.corrupt-*")), "the damaged step is set aside"


def test_sigterm_to_every_rank_stops_at_one_step_and_resumes_exactly(reference, tmp_path):
    ckpt = tmp_path / "ckpt"
    job = start(lm(ckpt), tmp_path / "term.txt")
    wait_until(lambda: "trainctl step=10 " in job.text(), "step 10", job)
    # Every process at once, as SageMaker does: each rank gets the notice directly and again
    # from torchrun.
    kill_tree(job.proc.pid, signal.SIGTERM)
    job.proc.wait()
    text = job.text()
    stopped = {int(rank): int(step) for rank, step, _ in STOPPED_RE.findall(text)}
    assert sorted(stopped) == [0, 1], text[-4000:]
    step = stopped[0]
    assert stopped[1] == step and 10 <= step < STEPS
    assert step in sharded_checkpoint_steps(ckpt)
    assert "forcefully exiting" not in text and "final_state_sha256" not in text

    code, text = run_to_end(lm(ckpt), tmp_path / "rerun.txt")
    assert code == 0, text[-4000:]
    assert RESUME_RE.findall(text) == [str(step)]
    assert final_hash(text) == reference["hash"]


def test_token_file_from_the_sagemaker_channel_with_string_hyperparameters(tmp_path):
    # What the container does: the folder's files in /opt/ml/code, the script run by path
    # (one process, no torchrun), hyperparameters as strings, data in SM_CHANNEL_TRAIN.
    code = tmp_path / "code"
    code.mkdir()
    for path in ENTRYPOINTS.iterdir():
        if path.is_file() and path.name != "__init__.py" and path.suffix in (".py", ".txt"):
            shutil.copy(path, code / path.name)
    data = tmp_path / "train"
    data.mkdir()
    # A learnable corpus: a repeating 97-token cycle of ids spread over a 5,000 vocabulary (uint16 ids past 255; a
    # 50,000 one cost 10x the output layer, most of this test's CPU, for nothing the assertions look at).
    cycle = (np.arange(97, dtype=np.uint32) * 509) % 5000
    np.tile(cycle, 200).astype(np.uint16).tofile(data / "corpus.bin")
    env = clean_env(SM_MODEL_DIR=str(tmp_path / "model"), SM_CHANNEL_TRAIN=str(data),
                    SM_CURRENT_HOST="algo-1", SM_HOSTS='["algo-1"]', PYTHONPATH="")
    argv = [sys.executable, "train_lm.py", "--preset", "tiny", "--vocab_size", "5000",
            "--batch_size", "4", "--grad_accum", "2", "--steps", "20", "--log_every", "10",
            "--lr", "0.01", "--bf16", "False", "--checkpoint-dir", "none"]
    rc, text = run_to_end(argv, tmp_path / "log.txt", env=env, cwd=code)
    assert rc == 0, text[-4000:]
    assert "platform=sagemaker host=algo-1" in text and "grad_accum=2 global_batch=8" in text
    losses = [float(loss) for _, loss, _, _ in LM_METRIC_RE.findall(text)]
    assert len(losses) == 2 and losses[1] < 0.75 * losses[0], text[-4000:]
    final_hash(text)
    assert (tmp_path / "model" / "model.pt").is_file()

    # Ids beyond the vocabulary: one clear line, not an index error deep in the embedding.
    argv[argv.index("5000")] = "1000"
    rc, text = run_to_end(argv, tmp_path / "log2.txt", env=env, cwd=code)
    assert rc != 0
    assert "beyond the model's vocabulary of 1000" in text


def test_replicated_ddp_with_accumulation_and_smddp_asked_on_the_cpu(tmp_path):
    """--sharding none (the plan's ddp: the model fits whole) trains with DDP, accumulating 2 micro-batches
    per step; --dist-backend smddp on a CPU says it runs gloo instead. Its DCP checkpoint resumes: a rerun of
    the finished job trains nothing and ends in the same full-state hash."""
    args = ["--preset", "tiny", "--batch-size", "2", "--steps", "12", *ARGS[6:]]
    for flag in ("--log-every", "--checkpoint-every"):
        args[args.index(flag) + 1] = "6"
    cmd = torchrun_cmd(TRAIN_LM, [*args, "--checkpoint-dir", str(tmp_path / "ckpt"), "--sharding", "none",
                                  "--grad-accum", "2", "--global-batch-size", "8", "--dist-backend", "smddp"])
    code, text = run_to_end(cmd, tmp_path / "log.txt")
    assert code == 0, text[-4000:]
    assert "sharding=none" in text and "grad_accum=2" in text and "global_batch=8" in text
    assert "--dist-backend smddp: smddp runs on GPUs only; using gloo" in text
    losses = [float(loss) for _, loss, _, _ in LM_METRIC_RE.findall(text)]
    assert len(losses) == 2 and losses[-1] < losses[0], losses
    again_code, again = run_to_end(cmd, tmp_path / "again.txt")
    assert again_code == 0 and not LM_METRIC_RE.findall(again)
    assert final_hash(again) == final_hash(text)
