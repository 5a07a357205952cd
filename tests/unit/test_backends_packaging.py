"""The code tarball: byte-identical for identical files (so its hash names it), .gitignore honoured."""
from __future__ import annotations

import io
import os
import tarfile

from trainctl.backends.packaging import pack


def _tree(root, files):
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_same_files_same_bytes_whatever_the_mtimes_and_order(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _tree(a, {"train.py": "print(1)\n", "pkg/util.py": "x = 1\n"})
    _tree(b, {"pkg/util.py": "x = 1\n", "train.py": "print(1)\n"})
    os.utime(b / "train.py", (1e9, 1e9))
    pa, pb = pack(a), pack(b)
    assert pa.data == pb.data and pa.sha256 == pb.sha256
    (b / "train.py").write_text("print(2)\n")
    assert pack(b).sha256 != pa.sha256


def test_gitignore_and_caches_are_not_shipped(tmp_path):
    _tree(tmp_path, {"train.py": "", "data/big.bin": "x", "logs/a.log": "", "keep.log.txt": "",
                     "__pycache__/m.pyc": "", ".git/HEAD": "", "sub/out.ckpt": "", ".env": "SECRET=1",
                     ".gitignore": "data/\n*.log\n/sub/*.ckpt\n"})
    pkg = pack(tmp_path)
    assert set(pkg.files) == {".gitignore", "train.py", "keep.log.txt"}
    with tarfile.open(fileobj=io.BytesIO(pkg.data)) as tar:
        members = tar.getmembers()
    assert sorted(m.name for m in members) == sorted(pkg.files)
    assert all(m.mtime == 0 and m.uid == 0 and m.uname == "" for m in members)
