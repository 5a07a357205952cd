"""Each sandbox host's own /opt/ml: a process run in a mount namespace of its own, with a host folder bound
at /opt/ml (and at other fixed paths), so a script that hard-codes SageMaker's paths (`/opt/ml/checkpoints`,
`/opt/ml/model`, ...) works on every host of one machine, as it does on a SageMaker host or an EC2 node.

`unshare -m --propagation private` gives the process a copy of the mount table whose changes reach no other
process; `mount --bind FOLDER /opt/ml` inside it shows the host's folder there. The folder is the same files
seen from outside (the sandbox reads and writes them at their own path), and the mounts vanish with the last
process of the namespace. It needs root (CAP_SYS_ADMIN) and util-linux's `unshare`; the machines and CI that
run the sandbox are root.

Where that is not possible (not root, no `unshare`, a container that forbids it) or it is switched off
(TRAINCTL_SANDBOX_PRIVATE_OPT_ML=0), callers fall back to the host folders' own paths and say once, in the
server's log, what differs (`fallback_note`).
"""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading

SWITCH_ENV = "TRAINCTL_SANDBOX_PRIVATE_OPT_ML"

_log = logging.getLogger("trainctl_sandbox")
_lock = threading.Lock()
_probed: dict[str, str | None] = {}
_said: set[str] = set()

# Binds each target path (made if missing: a mount point must exist), then runs the command from `cwd`.
# "$1" is the system's mount (never a `mount` the job's PATH puts first), "$2" the working folder, then
# target/source pairs up to "--", then the command.
_WRAPPER = r"""set -e
mount=$1 cwd=$2; shift 2
while [ "$1" != "--" ]; do
  mkdir -p "$1"
  "$mount" --bind "$2" "$1"
  shift 2
done
shift
cd "$cwd"
exec "$@"
"""


def unavailable() -> str | None:
    """None when private mounts work here; otherwise why not (probed once per process)."""
    if os.environ.get(SWITCH_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return f"switched off ({SWITCH_ENV}=0)"
    with _lock:
        if "reason" not in _probed:
            _probed["reason"] = _probe()
        return _probed["reason"]


def _probe() -> str | None:
    if os.name != "posix" or os.geteuid() != 0:
        return "the sandbox is not running as root (a mount namespace needs CAP_SYS_ADMIN)"
    if not shutil.which("unshare") or not shutil.which("mount"):
        return "util-linux's unshare and mount are not on PATH"
    try:
        done = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as e:
        return f"unshare -m failed: {e}"
    if done.returncode != 0:
        return f"unshare -m is not permitted here: {done.stderr.strip()[:200]}"
    return None


def wrap(command: list[str], binds: dict[str, str], cwd: str) -> list[str]:
    """`command` run from `cwd` in a mount namespace of its own where each bind target shows its source folder.
    The process keeps its pid through unshare and sh (both exec), so signals reach the command itself."""
    pairs = [part for target, source in binds.items() for part in (target, source)]
    return [shutil.which("unshare") or "unshare", "-m", "--propagation", "private", "/bin/sh", "-c", _WRAPPER, "sh",
            shutil.which("mount") or "mount", cwd, *pairs, "--", *command]


def fallback_note(who: str, differs: str) -> None:
    """Say once per process (and per kind of host) why hosts share the machine's paths, and what differs."""
    reason = unavailable()
    with _lock:
        if who in _said:
            return
        _said.add(who)
    _log.warning("%s hosts do not get a private /opt/ml (%s): %s", who, reason, differs)
