"""The job's code as `sourcedir.tar.gz`, byte-for-byte deterministic so its sha256 names it; one packager
for both platforms (and the bundled entrypoints), so the same spec ships the same bytes everywhere.

Same files -> same bytes -> same S3 key, so unchanged code is never uploaded twice: names sorted,
mtimes/uids/gids/owner names fixed, modes normalised, gzip header without a timestamp or file name.
Excluded: SECRETS (credential files and folders of secrets, at any depth: never shipped, whatever a
.gitignore says, and named in the launch preview), ALWAYS_EXCLUDE (never overridable: caches, VCS data, local
environments), then the source folder's .gitignore and .trainctlignore with git's own semantics (pathspec's
GitIgnoreSpec: negation, anchoring, `**`). A spec's `source_dir` is relative to the spec file's folder,
wherever trainctl runs; the home folder, or a folder above it, is refused as one.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from trainctl.errors import UsageError

# Never shipped, and said so: credentials and the folders that hold them (cloud CLIs, SSH, GPG, Docker,
# Kubernetes, package registries, git's stored passwords), private keys, and dotenv files.
SECRETS = (".aws/", ".ssh/", ".gnupg/", ".docker/", ".kube/", ".azure/", ".config/gcloud/", ".netrc", "_netrc",
           ".git-credentials", ".pypirc", ".npmrc", ".s3cfg", ".boto", ".vault-token", ".env", ".env.*",
           "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", "*.pem", "*.p12", "*.pfx", "credentials.json")
# Never shipped: caches, VCS data and local environments (large and machine-specific).
ALWAYS_EXCLUDE = (".git/", "__pycache__/", "*.pyc", "*.pyo", ".venv/", "venv/", ".mypy_cache/", ".pytest_cache/",
                  ".ipynb_checkpoints/", ".DS_Store", "*.egg-info/")
LISTED_FILES = 20  # the launch preview names this many of the code's files, then counts the rest
MAX_BYTES = 200 * 1024 * 1024  # the container downloads this before every start; data belongs in channels
ENTRYPOINTS_DIR = Path(__file__).resolve().parents[1] / "entrypoints"
BUNDLED_PROGRAMS = {"ddp": "train_ddp.py", "neuron": "train_neuron.py", "lm": "train_lm.py"}
# The bundled folder is a package here (for tests and imports); on the hosts its scripts run as scripts.
BUNDLED_SKIP = ("__init__.py",)


@dataclass(frozen=True)
class Package:
    data: bytes
    sha256: str
    files: tuple[str, ...]
    secrets_left_out: tuple[str, ...] = ()  # files and folders SECRETS kept out of it

    @property
    def key_hash(self) -> str:
        return self.sha256[:20]

    def listing(self) -> str:
        """The files for people: the first LISTED_FILES names, cleaned of control characters, then a count."""
        from trainctl.text.safe import clean

        shown = ", ".join(clean(f, one_line=True) for f in self.files[:LISTED_FILES])
        more = len(self.files) - LISTED_FILES
        return shown + (f" and {more} more" if more > 0 else "")

    def secrets_note(self) -> str | None:
        from trainctl.text.safe import clean

        if not self.secrets_left_out:
            return None
        return (f"left out of the code as credentials: {', '.join(clean(f, True) for f in self.secrets_left_out[:10])}"
                + (f" and {len(self.secrets_left_out) - 10} more" if len(self.secrets_left_out) > 10 else ""))


def _ignore_specs(root: Path, skip: tuple[str, ...]):
    import pathspec

    lines: list[str] = list(skip)
    for name in (".gitignore", ".trainctlignore"):
        f = root / name
        if f.is_file():
            lines += f.read_text().splitlines()
    return (pathspec.GitIgnoreSpec.from_lines(SECRETS), pathspec.GitIgnoreSpec.from_lines(ALWAYS_EXCLUDE),
            pathspec.GitIgnoreSpec.from_lines(lines))


def list_files(root: Path, skip: tuple[str, ...] = (), secrets: list[str] | None = None) -> list[str]:
    """The files shipped, in order; `secrets` (when given) receives what SECRETS kept out."""
    secret, always, ignored = _ignore_specs(root, skip)
    found_secrets = secrets if secrets is not None else []

    def excluded(rel: str) -> bool:
        if secret.match_file(rel):
            found_secrets.append(rel)
            return True
        return always.match_file(rel) or ignored.match_file(rel)

    out: list[str] = []

    def walk(d: Path, prefix: str) -> None:
        for child in sorted(d.iterdir(), key=lambda p: p.name):
            rel = prefix + child.name
            if child.is_symlink():
                continue  # a link may point outside the source dir; never follow it into the tarball
            if child.is_dir():
                if not excluded(rel + "/"):  # git does not look inside an excluded folder
                    walk(child, rel + "/")
            elif child.is_file() and not excluded(rel):
                out.append(rel)

    walk(root, "")
    return out


def job_code(spec: Any, spec_path: str) -> tuple[Package, str]:
    """(the job's code package, the script to run): the bundled entrypoints, or the spec's source_dir
    resolved from the spec file's folder (never from the current directory)."""
    ep = spec.entrypoint
    if ep.bundled:
        return pack(ENTRYPOINTS_DIR, BUNDLED_SKIP), BUNDLED_PROGRAMS[ep.bundled]
    root = (Path(spec_path).resolve().parent / Path(ep.source_dir).expanduser()).resolve()
    home = Path.home().resolve()
    if root == home or root in home.parents:
        raise UsageError(f"source_dir {root} is {'your home folder' if root == home else 'above your home folder'}: "
                         "it would ship everything in it; point source_dir at the folder of your training code")
    if not (root / ep.script).is_file():
        raise UsageError(f"entrypoint script {ep.script} not found in source_dir {root} (source_dir is relative "
                         f"to the spec's folder)")
    pkg = pack(root)
    script = PurePosixPath(os.path.normpath(ep.script)).as_posix()
    if script not in pkg.files:  # a .gitignore of `*`, or a pattern that matches the script: a job that cannot start
        raise UsageError(f"entrypoint script {ep.script} is left out of the code package by {root}'s .gitignore or "
                         f".trainctlignore ({len(pkg.files)} files packed): add `!{script}` there, or narrow the "
                         "pattern that matches it")
    return pkg, ep.script


class _TooBig(Exception):
    """The compressed package passed MAX_BYTES: packing stops there."""


class _CappedBuffer(io.RawIOBase):
    """Where the gzip stream goes: refuses to grow past `limit` bytes, so a huge source_dir is never held whole."""

    def __init__(self, limit: int):
        super().__init__()
        self.buffer, self.limit = io.BytesIO(), limit

    def writable(self) -> bool:
        return True

    def write(self, chunk) -> int:
        if self.buffer.tell() + len(chunk) > self.limit:
            raise _TooBig
        return self.buffer.write(chunk)


def pack(root: str | Path, skip: tuple[str, ...] = ()) -> Package:
    """The package, streamed: each file is read in chunks into the tar, the tar into gzip, gzip into a buffer
    that stops at MAX_BYTES (memory stays near the package's size, never the source folder's)."""
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"source_dir {root}: no such directory")
    secrets: list[str] = []
    files = list_files(root, skip, secrets)
    out = _CappedBuffer(MAX_BYTES)
    try:
        with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as gz, \
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for rel in files:
                _add(tar, root / rel, rel)
    except _TooBig:
        raise UsageError(f"source_dir {root} packs to more than {MAX_BYTES >> 20} MiB (the limit; packing "
                         "stopped there): exclude data and outputs with a .gitignore or .trainctlignore") from None
    data = out.buffer.getvalue()
    return Package(data=data, sha256=hashlib.sha256(data).hexdigest(), files=tuple(files),
                   secrets_left_out=tuple(secrets))


def _add(tar: tarfile.TarFile, path: Path, rel: str) -> None:
    with path.open("rb") as f:
        stat = os.fstat(f.fileno())
        info = tarfile.TarInfo(rel)
        info.size = stat.st_size
        info.mtime = 0
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mode = 0o755 if stat.st_mode & 0o111 else 0o644
        tar.addfile(info, f)  # copied in chunks
