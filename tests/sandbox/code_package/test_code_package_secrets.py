"""Credentials never ship as job code: a source_dir holding a home folder's secrets (cloud and SSH keys, netrc,
git's stored passwords, Docker's auth) leaves them out whatever its .gitignore says, and the launch preview
names what was left out; the home folder itself (or a folder above it) is refused as source_dir."""
from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
from pathlib import Path

from tests.support.helpers import run_cli
from trainctl.backends.packaging import pack

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "own-script"
SECRETS = {".aws/credentials": "[default]\naws_secret_access_key=x\n", ".ssh/id_rsa": "-----BEGIN KEY-----\n",
           ".netrc": "machine x password y\n", ".git-credentials": "https://u:p@github.com\n",
           ".docker/config.json": '{"auths": {}}\n', "keys/id_ed25519": "k\n", "sub/.env": "TOKEN=1\n"}


def _project(root: Path) -> Path:
    shutil.copytree(EXAMPLE, root)
    for rel, text in SECRETS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    # a .gitignore that would ship them: negations cannot bring credentials back
    (root / ".gitignore").write_text("!.aws/\n!.ssh/\n!.netrc\n!.git-credentials\n!.docker/\n")
    return root


def test_credentials_are_left_out_of_the_code_whatever_the_gitignore_says(tmp_path):
    pkg = pack(_project(tmp_path / "project"))
    with tarfile.open(fileobj=io.BytesIO(pkg.data)) as tar:
        names = set(tar.getnames())
    assert names == {".gitignore", "job.yaml", "train.py"}
    assert set(pkg.secrets_left_out) == {".aws/", ".ssh/", ".netrc", ".git-credentials", ".docker/",
                                         "keys/id_ed25519", "sub/.env"}


def test_the_launch_preview_names_the_credentials_left_out(sandbox_env, tmp_path):
    project = _project(tmp_path / "project")
    proc = run_cli(["--output", "json", "launch", str(project / "job.yaml"), "--dry-run"],
                   Path(os.environ["TRAINCTL_HOME"]), env=sandbox_env.env)
    assert proc.returncode == 0, proc.stderr
    notes = json.loads(proc.stdout)["notes"]
    (said,) = [n for n in notes if n.startswith("left out of the code as credentials:")]
    assert ".aws/" in said and ".ssh/" in said and ".git-credentials" in said
    (listing,) = [n for n in notes if n.startswith("code 3 files")]
    assert "credentials" not in listing and "id_rsa" not in listing


def test_the_home_folder_or_one_above_it_is_refused_as_source_dir(sandbox_env, tmp_path):
    home_dir = tmp_path / "me"
    (home_dir / "proj").mkdir(parents=True)
    spec = (EXAMPLE / "job.yaml").read_text()
    (home_dir / "job.yaml").write_text(spec.replace("source_dir: .", 'source_dir: "~"'))
    (home_dir / "proj" / "job.yaml").write_text(spec.replace("source_dir: .", 'source_dir: "../.."'))
    for spec_path, said in ((home_dir / "job.yaml", f"source_dir {home_dir} is your home folder"),
                            (home_dir / "proj" / "job.yaml", f"source_dir {tmp_path} is above your home folder")):
        proc = run_cli(["launch", str(spec_path), "--dry-run"], Path(os.environ["TRAINCTL_HOME"]),
                       env={**sandbox_env.env, "HOME": str(home_dir)})
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert said in line
