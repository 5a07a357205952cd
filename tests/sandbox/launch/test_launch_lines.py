"""What a launch prints while it works fits the terminal: each "calling SERVICE:Operation (why)" line is wrapped
at the terminal's width between words, its lists abbreviated, and no id, key or path is ever cut in two. The
launch preview tells the truth about requirements.txt: SageMaker's container installs it, the sandbox does not."""
from __future__ import annotations

import json
import re

import pytest

from tests.support.helpers import CONFIGS, run_cli

SPEC = str(CONFIGS / "vit-base-g5.yaml")


def _fits(line: str, columns: int) -> bool:
    """Within the width, or a single word wider than a line (a path, an image name), on a line of its own."""
    return len(line) <= columns or " " not in line.strip()


@pytest.mark.parametrize("columns", [80, 100])
def test_launch_lines_fit_and_never_split_an_id(sandbox, tmp_path, columns):
    home = tmp_path / "home"
    proc = run_cli(["launch", SPEC, "--platform", "ec2", "--layout", "g5.xlarge:1:spot", "--yes"], home,
                   env={**sandbox.env, "COLUMNS": str(columns)})
    assert proc.returncode == 0, proc.stderr
    job = proc.stdout.strip().splitlines()[-1]
    lines = proc.stderr.splitlines()
    assert all(_fits(ln, columns) for ln in lines), [ln for ln in lines if not _fits(ln, columns)]
    assert any(ln.strip().startswith("calling s3:PutObject") for ln in lines)
    words = {w for ln in lines for w in ln.split()}
    from trainctl.catalog.images import DLAMI_PARAMETERS

    ssm = DLAMI_PARAMETERS["gpu"]
    assert ssm in words and f"{job}:" in words  # whole, never cut at the width
    assert any(re.fullmatch(r"fleet-[0-9a-f-]{36}:?", w) for w in words)
    assert any(re.fullmatch(r"s3://trainctl-\d{12}-[a-z0-9-]+/trainctl/code/[0-9a-f]{64}/sourcedir\.tar\.gz", w)
               for w in words)
    run_cli(["down", job], home, env=sandbox.env)


def test_the_preview_says_who_installs_requirements(sandbox, tmp_path):
    from trainctl_sandbox.testing import add_nat

    add_nat(sandbox)
    proc = run_cli(["-o", "json", "launch", SPEC, "--platform", "sagemaker", "--layout", "g5.xlarge:1:spot",
                    "--dry-run"], tmp_path / "home", env=sandbox.env)
    assert proc.returncode == 0, proc.stderr
    notes = " ".join(json.loads(proc.stdout)["notes"])
    assert "SageMaker's training container pip-installs it" in notes
    assert "the local sandbox installs nothing" in notes
