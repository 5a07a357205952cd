"""A long EC2 job keeps its disk and its bucket bounded: the node agent restores only the
newest complete checkpoint, and prunes S3 to the job's last K steps after each upload. Sharded checkpoints
(folders, complete with their manifest) travel as well, the manifest last."""
from __future__ import annotations

import json

from tests.support.node_agent_helpers import (FakeImds, checkpoint_file, disk_bytes, make_agent, s3_keys)

JOB = "ckpt-job"
ROUNDS, KEEP, SIZE = 40, 3, 4096


def test_many_checkpoints_keep_disk_and_bucket_bounded(sandbox_env, tmp_path):
    sb = sandbox_env
    imds = FakeImds("i-0ckpt00000000001", "10.0.0.5")
    node = make_agent(sb, tmp_path / "node-a", JOB, imds, args=["--keep", str(KEEP)])
    ckpt = tmp_path / "node-a" / "checkpoints"
    try:
        for step in range(1, ROUNDS + 1):
            checkpoint_file(ckpt, step * 100, SIZE)
            for old in sorted(ckpt.iterdir())[:-KEEP]:  # the entrypoint keeps its own last K (CheckpointStore)
                old.unlink()
            node.sync_checkpoints()
            in_s3 = s3_keys(sb, f"{JOB}/checkpoints/")
            assert len(in_s3) <= KEEP, f"round {step}: {len(in_s3)} checkpoints in S3"
        assert [k.split("/")[-1][5:15] for k in in_s3] == [f"{s * 100:010d}" for s in range(ROUNDS - 2, ROUNDS + 1)]

        # A replacement node (and a survivor restarting) fetches the newest checkpoint, not the history.
        fresh = make_agent(sb, tmp_path / "node-b", JOB, imds, args=["--keep", str(KEEP)])
        fresh.restore_checkpoints()
        restored = sorted(p.name for p in (tmp_path / "node-b" / "checkpoints").iterdir())
        assert restored == [in_s3[-1].split("/")[-1]]
        assert disk_bytes(tmp_path / "node-b" / "checkpoints") == SIZE
        fresh.log.stopping.set()
    finally:
        node.log.stopping.set()
        imds.close()


def _sharded_step(directory, step: int, complete: bool = True) -> None:
    folder = directory / f"step-{step:010d}"
    folder.mkdir(parents=True)
    (folder / "__0_0.distcp").write_bytes(b"shard" * 100)
    (folder / ".metadata").write_bytes(b"meta")
    if complete:
        (folder / "manifest.json").write_text(json.dumps({"step": step}))


def test_sharded_checkpoints_upload_manifest_last_and_restore_whole(sandbox_env, tmp_path):
    sb = sandbox_env
    imds = FakeImds("i-0ckpt00000000002", "10.0.0.6")
    node = make_agent(sb, tmp_path / "node-a", JOB, imds, keep_checkpoints=2)
    ckpt = tmp_path / "node-a" / "checkpoints"
    order: list[str] = []
    record = lambda params, **_: order.append(params["Key"])  # noqa: E731
    node.s3.meta.events.register("before-parameter-build.s3.PutObject", record)
    try:
        for step in (10, 20, 30):
            _sharded_step(ckpt, step)
            node.sync_checkpoints()
        _sharded_step(ckpt, 40, complete=False)  # being written: not uploaded, not restored
        node.sync_checkpoints()
        step30 = [k for k in order if "step-0000000030/" in k]
        assert step30[-1].endswith("/manifest.json") and len(step30) == 3
        in_s3 = s3_keys(sb, f"{JOB}/checkpoints/")
        assert {k.split("/")[2] for k in in_s3} == {"step-0000000020", "step-0000000030"}

        fresh = make_agent(sb, tmp_path / "node-b", JOB, imds)
        fresh.restore_checkpoints()
        got = tmp_path / "node-b" / "checkpoints"
        assert sorted(p.name for p in got.iterdir()) == ["step-0000000030"]
        assert sorted(p.name for p in (got / "step-0000000030").iterdir()) == [".metadata", "__0_0.distcp",
                                                                                 "manifest.json"]
        fresh.log.stopping.set()
    finally:
        node.s3.meta.events.unregister("before-parameter-build.s3.PutObject", record)
        node.log.stopping.set()
        imds.close()
