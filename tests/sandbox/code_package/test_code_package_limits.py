"""The code package is streamed and checked: a 1 GiB file is packed without holding it in memory (the CLI's
peak memory stays far below the file's size), packing stops at the size limit, and a .gitignore that leaves the
entry script out is refused before anything is created."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.helpers import ROOT, clean_env, run_cli

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "own-script"
GIB = 1 << 30


def _project(root: Path) -> Path:
    shutil.copytree(EXAMPLE, root)
    return root / "job.yaml"


def _peak_rss_mb_of(args: list[str], home: Path, env: dict) -> tuple[subprocess.CompletedProcess, float]:
    """Run the CLI under a parent that reports its child's peak resident memory (ru_maxrss, KiB on Linux)."""
    probe = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "sys.stdout.write(p.stdout); sys.stderr.write(p.stderr); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(p.returncode)")
    proc = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "trainctl.cli", *args], cwd=ROOT,
                          env=clean_env(home, env), capture_output=True, text=True, timeout=300)
    *said, peak = proc.stderr.strip().splitlines()
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout, "\n".join(said)), int(peak) / 1024


def test_a_large_file_is_packed_without_holding_it_in_memory(sandbox_env, tmp_path):
    spec = _project(tmp_path / "project")
    with open(tmp_path / "project" / "weights.bin", "wb") as f:
        f.truncate(GIB)  # a sparse GiB of zeros: it compresses to about a megabyte
    proc, peak_mb = _peak_rss_mb_of(["launch", str(spec), "--dry-run"], Path(os.environ["TRAINCTL_HOME"]),
                                    sandbox_env.env)
    assert proc.returncode == 0, proc.stderr
    assert peak_mb < 400, f"peak memory {peak_mb:.0f} MB while packing a 1024 MB file"


def test_packing_stops_at_the_size_limit(sandbox_env, tmp_path):
    spec = _project(tmp_path / "project")
    with open(tmp_path / "project" / "noise.bin", "wb") as f:
        for _ in range(210):
            f.write(os.urandom(1 << 20))  # incompressible: the package would pass 200 MB
    proc = run_cli(["launch", str(spec), "--dry-run"], Path(os.environ["TRAINCTL_HOME"]), env=sandbox_env.env)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "packs to more than 200 MiB (the limit; packing stopped there)" in line


def test_a_gitignore_that_leaves_the_entry_script_out_is_refused(sandbox_env, tmp_path):
    spec = _project(tmp_path / "project")
    (tmp_path / "project" / ".gitignore").write_text("*\n")
    proc = run_cli(["launch", str(spec), "--dry-run"], Path(os.environ["TRAINCTL_HOME"]), env=sandbox_env.env)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "entrypoint script train.py is left out of the code package" in line and "`!train.py`" in line
