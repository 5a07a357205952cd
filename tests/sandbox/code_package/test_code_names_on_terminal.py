"""Names from the user's files reach the terminal cleaned and bounded: a file name carrying escape sequences
prints without them in the dry-run summary, the launch preview and the `calling s3:PutObject` line, and the
preview names at most 20 of the code's files."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tests.support.helpers import run_cli

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "own-script"
EVIL = "evil\x1b[2J\x1b]52;c;aGk=\x07\u202e.py"


def _project(root: Path) -> Path:
    shutil.copytree(EXAMPLE, root)
    (root / EVIL).write_text("x = 1\n")
    for i in range(30):
        (root / f"mod{i:02d}.py").write_text("")
    spec = root / "job.yaml"
    (root / "ec2.yaml").write_text(spec.read_text().replace("platforms: [sagemaker]", "platforms: [ec2]"))
    return spec


def test_file_names_reach_the_terminal_cleaned_and_the_listing_is_capped(sandbox_env, tmp_path):
    spec, home = _project(tmp_path / "project"), Path(os.environ["TRAINCTL_HOME"])
    dry = run_cli(["launch", str(spec), "--dry-run"], home, env=sandbox_env.env)  # SageMaker: lists the files
    launched = run_cli(["--output", "json", "launch", str(spec.parent / "ec2.yaml"), "--yes"], home,
                       env=sandbox_env.env)
    assert dry.returncode == 0 and launched.returncode == 0, (dry.stderr, launched.stderr)
    for text in (dry.stdout, dry.stderr, launched.stderr):
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "evil[2J" not in dry.stdout  # the whole sequence went, not only its ESC
    assert "calling s3:PutObject" in launched.stderr
    listing = dry.stdout[dry.stdout.index("code 34 files ("):]
    assert "evil.py" in listing[:300] and "and 14 more)" in listing[:300]  # 20 named, 14 counted
    assert run_cli(["down", json.loads(launched.stdout)["job_id"]], home, env=sandbox_env.env).returncode == 0
