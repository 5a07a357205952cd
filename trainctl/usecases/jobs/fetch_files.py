"""Writing what a job produced into the folder `trainctl fetch` made, and nowhere else.

Everything here comes from the job: its keys under `JOB/...` and the files of SageMaker's model.tar.gz are what the
job's script chose, so they are hostile input. Python 3.11.7's tarfile data filter lets a symlink member named
`x/` (trailing slash) that points at `..` through, and a later `x/...` is then written through the link; so no
extraction goes through tarfile's own extract, and no path is trusted:
- only regular files and directories are written: links, devices and FIFOs are refused (skipped, named);
- a name is split on `/`; `.` and empty parts are dropped; an absolute name or one with `..` is refused;
- a name whose parent is already a file (`a` beside `a/b`), or a duplicate, is refused;
- every folder is walked with directory file descriptors opened O_NOFOLLOW|O_DIRECTORY from the destination, and
  every file is created O_CREAT|O_EXCL|O_NOFOLLOW, so no path goes through a link, even one made meanwhile; and
  each file's realpath is checked to be the destination's realpath joined with the name;
- what is written is capped (declared sizes, summed before anything is written, against the cap and the free
  space of the destination's file system) and the bytes actually written are what is reported.
"""
from __future__ import annotations

import os
import tarfile
from contextlib import contextmanager
from dataclasses import dataclass, field

from trainctl.errors import UsageError
from trainctl.text.safe import clean

MAX_MEMBERS = 200_000  # files in one archive or under one prefix
MAX_NAME = 1024  # characters of one name (Linux: 255 per component, 4096 per path)
_CHUNK = 1 << 20


@dataclass
class Written:
    files: int = 0
    size: int = 0
    skipped: list[str] = field(default_factory=list)  # "NAME: why", each name made safe to print


def shown(name: str) -> str:
    """A job's key or member name as it may be printed (no control sequences, bounded)."""
    s = clean(name, one_line=True)
    return s if len(s) <= 120 else s[:117] + "..."


def parts_of(name: str) -> tuple[str, ...] | str:
    """The path components a name stands for under the destination, or why it is refused."""
    if len(name) > MAX_NAME:
        return "a name longer than 1024 characters"
    if name.startswith("/"):
        return "an absolute path"
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        return "a path with '..'"
    if "\x00" in name or any(len(p.encode()) > 255 for p in parts):
        return "a name Linux cannot hold"
    return parts


class Plan:
    """Which names become files, decided before anything is written (sorted order: deterministic)."""

    def __init__(self) -> None:
        self.files: set[tuple[str, ...]] = set()
        self.dirs: set[tuple[str, ...]] = set()

    def add(self, parts: tuple[str, ...], is_dir: bool) -> str | None:
        """None when the name is taken, or why it is refused."""
        parents = [parts[:i] for i in range(1, len(parts))]
        if any(p in self.files for p in parents):
            return "its folder is also a file of the job's (keys `a` and `a/b`)"
        if is_dir:
            if parts in self.files:
                return "a folder and a file of one name"
            self.dirs.update(parents + [parts])
            return None
        if not parts:
            return "names the destination itself"
        if parts in self.dirs:
            return "a file and a folder of one name (keys `a` and `a/b`)"
        if parts in self.files:
            return "a duplicate name"
        self.files.add(parts)
        self.dirs.update(parents)
        return None


def free_bytes(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def check_room(total: int, dest: str, cap: int, what: str, free: int | None = None) -> None:
    """Refuse before writing: more than the cap, or more than the destination's file system has free."""
    if total > cap:
        raise UsageError(f"{what} would write {total} bytes, over fetch's cap of {cap} bytes; nothing written "
                         f"(raise it with --max-gib if you expect that much)")
    free = free_bytes(dest) if free is None else free
    if total > free:
        raise UsageError(f"{what} would write {total} bytes and {dest} has {free} bytes free; nothing written "
                         "(free some space or fetch into another folder)")


def make_dest(dest: str) -> str:
    """The destination, created empty by fetch (an existing empty folder, not a link, is accepted); its realpath."""
    if os.path.lexists(dest):
        if os.path.islink(dest) or not os.path.isdir(dest) or os.listdir(dest):
            raise UsageError(f"{dest}: already exists and is not an empty folder; fetch writes into a new folder "
                             "of its own: name one that does not exist")
    else:
        os.makedirs(dest)
    return os.path.realpath(dest)


@contextmanager
def create(root: str, parts: tuple[str, ...]):
    """A new file at root/parts, opened for writing, reached through no link (else OSError)."""
    fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)]
    try:
        for name in parts[:-1]:
            try:
                os.mkdir(name, 0o755, dir_fd=fds[-1])
            except FileExistsError:
                pass
            fds.append(os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fds[-1]))
        fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=fds[-1])
    finally:
        for d in fds:
            os.close(d)
    path = os.path.join(root, *parts)
    with os.fdopen(fd, "wb") as f:
        if os.path.realpath(path) != path:  # belt and braces: the walk above already refused every link
            raise OSError(f"{path} resolves elsewhere")
        yield f


def discard(root: str, parts: tuple[str, ...]) -> None:
    """Removes the file `create` made at root/parts for an object that was not written (refused, changed, cut
    short), and the folders it made that are left empty: a failed object leaves no empty or partial file."""
    path = os.path.join(root, *parts)
    if os.path.isfile(path) and not os.path.islink(path):
        os.unlink(path)
    for depth in range(len(parts) - 1, 0, -1):
        try:
            os.rmdir(os.path.join(root, *parts[:depth]))
        except OSError:  # not empty (another object's file is there): kept
            break


def make_dir(root: str, parts: tuple[str, ...]) -> None:
    fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)]
    try:
        for name in parts:
            try:
                os.mkdir(name, 0o755, dir_fd=fds[-1])
            except FileExistsError:
                pass
            fds.append(os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fds[-1]))
    finally:
        for d in fds:
            os.close(d)


def _kind(m: tarfile.TarInfo) -> str | None:
    if m.isreg() or m.isdir():
        return None
    return ("a symbolic link" if m.issym() else "a hard link" if m.islnk() else
            "a FIFO" if m.isfifo() else "a device" if m.isdev() else "not a file or a folder")


def _decide(tar: tarfile.TarFile, written: Written, dest: str, cap: int) -> tuple[dict[str, tuple[str, ...]], set]:
    """First pass over the archive's headers: what is written (member name -> parts). The sizes the headers declare
    are summed as they come, and checked at once: the stream skips a member's data to reach the next header, and
    a header may declare a petabyte the archive does not hold."""
    plan, take, dirs, total, seen, free = Plan(), {}, set(), 0, 0, free_bytes(dest)
    for m in tar:
        seen += 1
        if seen > MAX_MEMBERS:
            raise UsageError(f"the archive holds more than {MAX_MEMBERS} members; nothing written")
        why = _kind(m)
        parts = parts_of(m.name)
        if why is None and isinstance(parts, str):
            why = parts
        if why is None:
            why = plan.add(parts, m.isdir())
        if why is not None:
            if m.isdir() and not parts_of(m.name):  # `./`: the archive's root, the destination itself
                continue
            written.skipped.append(f"{shown(m.name)}: {why}")
        elif m.isdir():
            dirs.add(parts)
        else:
            take[m.name] = parts
            total += m.size
            check_room(total, dest, cap, "the model archive", free)
    return take, dirs


def extract(archive: str, dest: str, cap: int) -> Written:
    """The regular files and folders of a .tar(.gz) into dest (a realpath), under the rules above."""
    written = Written()
    try:
        with tarfile.open(archive, "r|*") as tar:
            take, dirs = _decide(tar, written, dest, cap)
        for parts in sorted(dirs):
            make_dir(dest, parts)
        with tarfile.open(archive, "r|*") as tar:
            for m in tar:
                parts = take.pop(m.name, None)
                if parts is None or not m.isreg():
                    continue
                src = tar.extractfile(m)
                with create(dest, parts) as out:
                    while chunk := src.read(_CHUNK):
                        out.write(chunk)
                        written.size += len(chunk)
                written.files += 1
    except (tarfile.TarError, EOFError, OSError) as e:
        raise UsageError(f"{archive}: cannot be read as the job's model archive ({e}); {written.files} files "
                         f"written to {dest} before it stopped") from None
    return written
