"""Where a node's own folders lie on this machine: a node with its own mount namespace sees /opt/ml and
/opt/trainctl (nodes.py binds its folders there); the sandbox's services that act on a node's files (the Lustre
mount, lustre.py) translate the paths the node names back to the machine's. Below both, so neither imports the
other."""
from __future__ import annotations

import threading
from pathlib import Path

AGENT_ROOT, OPT_ML = "/opt/trainctl", "/opt/ml"   # where a node's folders appear to its processes

_lock = threading.Lock()
_seen: dict[tuple[int, str], dict[str, Path]] = {}   # (id of the sandbox context, instance id) -> {seen: on machine}


def register(ctx, instance_id: str, folders: dict[str, Path]) -> None:
    """The node's folders as its processes see them (`{"/opt/ml": <root>/ml, ...}`); none for a node without its
    own mounts (its processes name the machine's paths)."""
    with _lock:
        _seen[(id(ctx), instance_id)] = dict(folders)


def on_machine(ctx, instance_id: str, path: Path) -> Path:
    """A path as the node's processes name it -> the same file's path on this machine."""
    with _lock:
        folders = _seen.get((id(ctx), instance_id), {})
    for seen, folder in folders.items():
        if path == Path(seen) or Path(seen) in path.parents:
            return folder / path.relative_to(seen)
    return path
