"""The EC2 node agent installs the job's requirements.txt before the script, as SageMaker's training toolkit
does (`python -m pip install -r requirements.txt` in the code directory), and fails with the toolkit's
InstallRequirementsError message; quietly (one line on success) and once per node and requirements (a restart
skips pip). pip runs offline here (PIP_NO_INDEX): what is installed satisfies, what is
not fails, as on a node without the package index."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from trainctl.bootstrap.node_io import install_requirements

BUNDLED = Path(__file__).resolve().parents[2] / "trainctl" / "entrypoints" / "requirements.txt"


@pytest.fixture(autouse=True)
def offline_pip(monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")


def test_the_bundled_requirements_are_installed_once_in_one_line(tmp_path):
    shutil.copy(BUNDLED, tmp_path / "requirements.txt")  # timm, which the test environment has
    lines: list[str] = []
    install_requirements(str(tmp_path), str(tmp_path / "cache"), lines.append)
    assert len(lines) == 1 and lines[0].startswith("trainctl-agent: requirements.txt installed ("), lines
    install_requirements(str(tmp_path), str(tmp_path / "cache"), lines.append)  # the node's agent again
    assert len(lines) == 2 and "already installed on this node" in lines[1], lines


def test_a_requirement_that_cannot_be_installed_stops_the_node_with_sagemakers_message(tmp_path):
    (tmp_path / "requirements.txt").write_text("trainctl-no-such-package==9.9\n")
    lines: list[str] = []
    with pytest.raises(SystemExit) as failed:
        install_requirements(str(tmp_path), str(tmp_path / "cache"), lines.append)
    message = str(failed.value)
    assert message.startswith("InstallRequirementsError:\nExitCode 1\nErrorMessage \"ERROR: ")
    assert "trainctl-no-such-package" in message
    assert message.endswith(f'Command "{sys.executable} -m pip install --quiet --disable-pip-version-check '
                            '-r requirements.txt"')
    assert lines[-1] == message  # shipped to the job's log


def test_code_without_requirements_installs_nothing(tmp_path):
    lines: list[str] = []
    install_requirements(str(tmp_path), str(tmp_path / "cache"), lines.append)
    assert lines == []
