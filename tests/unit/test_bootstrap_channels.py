"""mount-s3 takes `--prefix` "ending in '/'" (Mountpoint for Amazon S3, `mount-s3 --help`, Bucket options) and
refuses another; a channel given as s3://bucket/shards (no slash) made the agent's mount fail and the node copy
the data instead of streaming it, silently slower. A stand-in mount-s3 on the PATH refuses as the real one does."""
from __future__ import annotations

import os


def test_the_agent_hands_mount_s3_a_prefix_ending_in_a_slash(tmp_path, monkeypatch):
    from trainctl.bootstrap.channels import mount

    tool = tmp_path / "bin" / "mount-s3"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n"
                    f"echo \"$@\" > {tmp_path / 'argv'}\n"
                    "while [ $# -gt 0 ]; do\n"
                    "  if [ \"$1\" = --prefix ]; then case \"$2\" in */) ;; *) echo \"error: invalid value '$2' for "
                    "'--prefix <PREFIX>': prefix must end in '/'\" >&2; exit 2;; esac; fi\n"
                    "  shift\n"
                    "done\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}:{os.environ['PATH']}")
    said: list[str] = []
    assert mount({"bucket": "my-datasets", "prefix": "shards"}, str(tmp_path / "mnt"), said.append), said
    assert (tmp_path / "argv").read_text().split()[:3] == ["--read-only", "--prefix", "shards/"]
    assert mount({"bucket": "my-datasets", "prefix": "shards/"}, str(tmp_path / "mnt"), said.append), said
    assert (tmp_path / "argv").read_text().split()[:3] == ["--read-only", "--prefix", "shards/"]
