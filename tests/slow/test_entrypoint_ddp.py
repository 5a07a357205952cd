"""train_ddp.py under real `torchrun --standalone --nproc_per_node=2` on the CPU (gloo).

One uninterrupted run is the reference; every interrupted-and-resumed run must end in the very
same final_state_sha256 (model and optimizer state bit for bit).
"""

from __future__ import annotations

import math
import os
import shutil
import signal

import pytest

from tests.support.entrypoint_helpers import (
    METRIC_RE, RESUME_RE, STOPPED_RE, TRAIN_DDP, alive, checkpoint_steps, final_hash, kill_tree,
    rank_pids, run_to_end, start, torchrun_cmd, wait_until,
)


STEPS = 40
ARGS = ["--model", "vit_micro", "--batch-size", "8", "--steps", str(STEPS), "--lr", "1e-3",
        "--seed", "1", "--log-every", "10", "--checkpoint-every", "10", "--keep", "3",
        "--device", "cpu"]


def ddp(checkpoint_dir) -> list[str]:
    return torchrun_cmd(TRAIN_DDP, [*ARGS, "--checkpoint-dir", str(checkpoint_dir)])


# session, not module: a worker may interleave this file with others, and a module fixture is then made
# again each time the file comes back (three reference runs instead of one)
@pytest.fixture(scope="session")
def reference(tmp_path_factory):
    """The uninterrupted run: its output, checkpoint folder and final hash."""
    root = tmp_path_factory.mktemp("reference")
    code, text = run_to_end(ddp(root / "ckpt"), root / "log.txt")
    assert code == 0, text[-4000:]
    return {"text": text, "dir": root / "ckpt", "hash": final_hash(text)}


def test_short_run_on_the_synthetic_task_lowers_the_loss(reference):
    metrics = [(int(s), float(loss), float(rate))
               for s, loss, rate in METRIC_RE.findall(reference["text"])]
    assert [step for step, _, _ in metrics] == list(range(10, STEPS + 1, 10))
    first, last = metrics[0][1], metrics[-1][1]
    # Chance level for 10 classes is ln(10) = 2.30; the labels are a function of the image, so
    # the model must do clearly better than where it started.
    assert first > 0.8 * math.log(10)
    assert last < 0.75 * first, metrics
    assert all(rate > 0 for _, _, rate in metrics)
    # Checkpoints: the last K kept, nothing half-written left behind.
    assert checkpoint_steps(reference["dir"]) == [20, 30, 40]
    assert not [p for p in reference["dir"].iterdir() if p.name.endswith(".tmp")]


def test_sigkill_of_the_whole_job_then_rerun_matches_uninterrupted(reference, tmp_path):
    ckpt = tmp_path / "ckpt"
    job = start(ddp(ckpt), tmp_path / "killed.txt")
    wait_until(lambda: any(step >= 10 for step in checkpoint_steps(ckpt)),
               "a checkpoint at step 10 or later", job)
    ranks = rank_pids(job.proc.pid)
    assert len(ranks) == 2
    killed = kill_tree(job.proc.pid, signal.SIGKILL)
    job.proc.wait()
    wait_until(lambda: not any(alive(pid) for pid in killed), "every killed process to be gone")
    assert "final_state_sha256" not in job.text(), "the job finished before it could be killed"

    code, text = run_to_end(ddp(ckpt), tmp_path / "rerun.txt")
    assert code == 0, text[-4000:]
    resumed = [int(step) for step in RESUME_RE.findall(text)]
    assert len(resumed) == 1 and 10 <= resumed[0] < STEPS, text[-4000:]
    assert final_hash(text) == reference["hash"]


def test_corrupt_newest_checkpoint_is_skipped_with_a_warning(reference, tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(reference["dir"], ckpt)
    newest = max(ckpt.glob("ckpt-0000000040-*.pt"))
    # Damage the middle of the file: torch.load alone would still return (wrong) tensors.
    data = bytearray(newest.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 256] = bytes(256)
    newest.write_bytes(bytes(data))
    # And what SIGKILL during a save leaves: a half-written temp file.
    stale = ckpt / ".ckpt-0000000050.somehost-12345.tmp"
    stale.write_bytes(b"PK\x03\x04 half a zip")

    code, text = run_to_end(ddp(ckpt), tmp_path / "rerun.txt")
    assert code == 0, text[-4000:]
    assert "skipping checkpoint of step 40" in text
    assert "does not match the name" in text
    assert RESUME_RE.findall(text) == ["30"]
    assert final_hash(text) == reference["hash"]
    assert not stale.exists()
    assert list(ckpt.glob("ckpt-0000000040-*.pt.corrupt-*")), "the broken file is set aside"


def _assert_every_rank_stopped_at_one_step(text: str, ckpt) -> int:
    stopped = {int(rank): int(step) for rank, step, _ in STOPPED_RE.findall(text)}
    assert sorted(stopped) == [0, 1], text[-4000:]
    step = stopped[0]
    assert stopped[1] == step and 0 < step < STEPS
    assert step in checkpoint_steps(ckpt)
    # torchrun would have had to SIGKILL a rank that did not exit on its own.
    assert "forcefully exiting" not in text
    assert "final_state_sha256" not in text
    return step


def test_sigterm_forwarded_by_torchrun_stops_every_rank_with_a_checkpoint(tmp_path):
    ckpt = tmp_path / "ckpt"
    job = start(ddp(ckpt), tmp_path / "term.txt")
    wait_until(lambda: "trainctl step=10 " in job.text(), "step 10", job)
    job.proc.send_signal(signal.SIGTERM)  # torchrun alone, as on EC2; it forwards to the ranks
    job.proc.wait()
    # torchrun itself exits 1 after a signal (its SignalException), whatever the ranks did; that
    # each rank exits 0 is shown by test_sigterm_on_one_rank_stops_all_ranks_with_exit_0.
    _assert_every_rank_stopped_at_one_step(job.text(), ckpt)


def test_sigterm_to_the_whole_process_tree_like_sagemaker(tmp_path):
    ckpt = tmp_path / "ckpt"
    job = start(ddp(ckpt), tmp_path / "term.txt")
    wait_until(lambda: "trainctl step=10 " in job.text(), "step 10", job)
    # Every process at once: each rank gets the notice directly and again from torchrun.
    kill_tree(job.proc.pid, signal.SIGTERM)
    job.proc.wait()
    _assert_every_rank_stopped_at_one_step(job.text(), ckpt)


def test_sigterm_on_one_rank_stops_all_ranks_with_exit_0(tmp_path):
    ckpt = tmp_path / "ckpt"
    job = start(ddp(ckpt), tmp_path / "term.txt")
    wait_until(lambda: "trainctl step=10 " in job.text(), "step 10", job)
    ranks = rank_pids(job.proc.pid)
    os.kill(ranks[1], signal.SIGTERM)
    # torchrun got no signal, so its exit code is the ranks' verdict: 0 only if every rank
    # exited 0.
    assert job.wait() == 0, job.text()[-4000:]
    text = job.text()
    _assert_every_rank_stopped_at_one_step(text, ckpt)
    signals = {int(rank): name for rank, _, name in STOPPED_RE.findall(text)}
    assert signals == {0: "SIGTERM-on-another-rank", 1: "SIGTERM"}


def test_four_ranks_resumed_from_a_checkpoint_end_bit_identical_to_the_uninterrupted_run(tmp_path):
    """With 3 or more ranks the all-reduce's order of summation follows DDP's bucket layout, which DDP redoes
    after its first backward: a resumed run must use the layout the uninterrupted run had (trainctl_loop.py,
    match_uninterrupted_buckets), or the model differs in its last bits from the uninterrupted one's."""
    def four(ckpt) -> list[str]:
        return torchrun_cmd(TRAIN_DDP, [*ARGS, "--checkpoint-dir", str(ckpt)], nproc=4)

    code, text = run_to_end(four(tmp_path / "whole"), tmp_path / "whole.txt")
    assert code == 0, text[-4000:]
    resumed_dir = tmp_path / "resumed"
    resumed_dir.mkdir()
    for saved in (tmp_path / "whole").glob("ckpt-0000000020-*.pt"):  # as a reclaim at step 20..29 leaves it
        shutil.copy(saved, resumed_dir / saved.name)
    code, again = run_to_end(four(resumed_dir), tmp_path / "resumed.txt")
    assert code == 0, again[-4000:]
    assert [int(s) for s in RESUME_RE.findall(again)] == [20]
    assert final_hash(again) == final_hash(text)
