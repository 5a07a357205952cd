"""The job's code as `sourcedir.tar.gz`, byte-for-byte deterministic so its sha256 names it.

Same files -> same bytes -> same S3 key, so unchanged code is never uploaded twice: names sorted,
mtimes/uids/gids/owner names fixed, modes normalised, gzip header without a timestamp or file name.
Excludes follow a useful subset of .gitignore (and .trainctlignore): `name`, `*.glob`, `dir/`,
`/anchored`, `a/b*`. `!negation` is not supported (a negated file stays excluded); the launch
notes list what was packed.
"""
from __future__ import annotations

import fnmatch
import gzip
import hashlib
import io
import tarfile
from dataclasses import dataclass
from pathlib import Path

from trainctl.errors import UsageError

# Never shipped: caches, VCS data and local environments (large, machine-specific, or secret).
ALWAYS_EXCLUDE = (".git/", "__pycache__/", "*.pyc", "*.pyo", ".venv/", "venv/", ".mypy_cache/", ".pytest_cache/",
                  ".ipynb_checkpoints/", ".DS_Store", ".env", "*.egg-info/")
MAX_BYTES = 200 * 1024 * 1024  # the container downloads this before every start; data belongs in channels


@dataclass(frozen=True)
class Package:
    data: bytes
    sha256: str
    files: tuple[str, ...]

    @property
    def key_hash(self) -> str:
        return self.sha256[:20]


def _patterns(root: Path) -> list[str]:
    pats = list(ALWAYS_EXCLUDE)
    for name in (".gitignore", ".trainctlignore"):
        f = root / name
        if f.is_file():
            pats += [ln.strip() for ln in f.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    return pats


def _excluded(rel: str, is_dir: bool, patterns: list[str]) -> bool:
    name = rel.rsplit("/", 1)[-1]
    for pat in patterns:
        if pat.startswith("!"):
            continue
        dir_only = pat.endswith("/")
        p = pat.rstrip("/")
        if dir_only and not is_dir:
            continue
        if p.startswith("/"):
            if fnmatch.fnmatchcase(rel, p[1:]):
                return True
        elif "/" in p:
            if fnmatch.fnmatchcase(rel, p):
                return True
        elif fnmatch.fnmatchcase(name, p):
            return True
    return False


def list_files(root: Path, skip: tuple[str, ...] = ()) -> list[str]:
    patterns = _patterns(root) + list(skip)
    out: list[str] = []

    def walk(d: Path, prefix: str) -> None:
        for child in sorted(d.iterdir(), key=lambda p: p.name):
            rel = prefix + child.name
            if child.is_symlink():
                continue  # a link may point outside the source dir; never follow it into the tarball
            if child.is_dir():
                if not _excluded(rel, True, patterns):
                    walk(child, rel + "/")
            elif child.is_file() and not _excluded(rel, False, patterns):
                out.append(rel)

    walk(root, "")
    return out


def pack(root: str | Path, skip: tuple[str, ...] = ()) -> Package:
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"source_dir {root}: no such directory")
    files = list_files(root, skip)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in files:
            path = root / rel
            data = path.read_bytes()
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
            tar.addfile(info, io.BytesIO(data))
    gz = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=gz, mtime=0, compresslevel=6) as f:
        f.write(raw.getvalue())
    data = gz.getvalue()
    if len(data) > MAX_BYTES:
        raise UsageError(f"source_dir {root} packs to {len(data) / 1e6:.0f} MB (limit {MAX_BYTES // 1_000_000} MB): "
                         "exclude data and outputs with a .gitignore or .trainctlignore")
    return Package(data=data, sha256=hashlib.sha256(data).hexdigest(), files=tuple(files))
