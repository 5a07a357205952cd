"""The EC2 node agent syncs the whole checkpoint folder (/opt/ml/checkpoints), whatever the script names its files,
sub-folders included, as SageMaker syncs CheckpointConfig.LocalPath (issue 37):
- only what changed goes up; a file being written (a temporary name) never does; what the script deletes is
  deleted in S3, so a script that keeps its last K checkpoints keeps the bucket bounded too;
- a replacement node restores the folder whole before its start;
- the bundled sharded checkpoints' manifest.json still goes up after its folder's other files."""
from __future__ import annotations

import json
import os

from tests.support.node_agent_helpers import FakeImds, make_agent, s3_keys

JOB = "ckpt-job"
ROUNDS, KEEP, SIZE = 12, 3, 4096


def _write_then_rename(path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(path.name + ".tmp")
    temp.write_bytes(data)
    os.replace(temp, path)


def test_any_names_and_sub_folders_are_synced_incrementally_and_restored_whole(sandbox_env, tmp_path):
    sb = sandbox_env
    imds = FakeImds("i-0ckpt00000000001", "10.0.0.5")
    node = make_agent(sb, tmp_path / "a" / "opt", JOB, imds)
    ckpt = tmp_path / "a" / "ml" / "checkpoints"
    assert node.ckpt_dir == str(ckpt)  # SageMaker's /opt/ml/checkpoints, beside the agent's folder
    uploads: list[str] = []
    count = lambda params, **_: uploads.append(params["Key"])  # noqa: E731
    node.s3.meta.events.register("before-parameter-build.s3.PutObject", count)
    try:
        for step in range(1, ROUNDS + 1):
            _write_then_rename(ckpt / "state.json", json.dumps({"step": step}).encode())  # overwritten in place
            _write_then_rename(ckpt / "weights" / f"model-{step}.bin", bytes([step]) * SIZE)
            for old in sorted((ckpt / "weights").glob("model-*.bin"), key=lambda p: int(p.stem.split("-")[1]))[:-KEEP]:
                old.unlink()  # the script keeps its own last K
            (ckpt / "weights" / "next.bin.tmp").write_bytes(b"half")  # being written: never uploaded
            node.sync_checkpoints(final=True)
            in_s3 = s3_keys(sb, f"{JOB}/checkpoints/")
            assert len(in_s3) == 1 + min(step, KEEP), in_s3
        assert not any(k.endswith(".tmp") for k in uploads)
        before = len(uploads)
        node.sync_checkpoints(final=True)
        assert len(uploads) == before  # nothing changed, nothing uploaded

        fresh = make_agent(sb, tmp_path / "b" / "opt", JOB, imds)  # a replacement node
        fresh.restore_checkpoints()
        got = tmp_path / "b" / "ml" / "checkpoints"
        assert json.loads((got / "state.json").read_text()) == {"step": ROUNDS}
        assert sorted(p.name for p in (got / "weights").iterdir()) == [f"model-{s}.bin" for s in
                                                                       range(ROUNDS - KEEP + 1, ROUNDS + 1)]
        fresh.log.stopping.set()
    finally:
        node.s3.meta.events.unregister("before-parameter-build.s3.PutObject", count)
        node.log.stopping.set()
        imds.close()


def test_a_file_still_changing_waits_and_a_manifest_follows_its_folder(sandbox_env, tmp_path):
    sb = sandbox_env
    imds = FakeImds("i-0ckpt00000000002", "10.0.0.6")
    node = make_agent(sb, tmp_path / "a" / "opt", JOB + "-2", imds)
    ckpt = tmp_path / "a" / "ml" / "checkpoints"
    node.checkpoints.settle_s = 3600.0  # nothing is old enough: only stability across two looks counts
    try:
        step = ckpt / "step-0000000030"
        step.mkdir(parents=True)
        (step / "__0_0.distcp").write_bytes(b"shard" * 100)
        (step / "manifest.json").write_text(json.dumps({"step": 30}))
        node.sync_checkpoints()  # first look: both just appeared, neither is known to be still
        assert s3_keys(sb, f"{JOB}-2/checkpoints/") == []
        (step / "__0_0.distcp").write_bytes(b"shard" * 200)  # still being written in place
        node.sync_checkpoints()  # the manifest is still, its folder's shard is not: neither goes
        assert s3_keys(sb, f"{JOB}-2/checkpoints/") == []
        node.sync_checkpoints()  # both still now: the shard, then the manifest
        assert s3_keys(sb, f"{JOB}-2/checkpoints/") == [f"{JOB}-2/checkpoints/step-0000000030/__0_0.distcp",
                                                        f"{JOB}-2/checkpoints/step-0000000030/manifest.json"]
    finally:
        node.log.stopping.set()
        imds.close()
