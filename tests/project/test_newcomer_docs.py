"""What a newcomer reads first says true and complete things: the README names every --objective, the docs cite no
issue numbers from trainctl's own tracker (which users cannot see), the packages' license is an SPDX string (a
license table makes every install print deprecation warnings), and `make install` says what it is doing."""
from __future__ import annotations

import re
import warnings

import pytest

from tests.support.helpers import ROOT
from trainctl.planner import OBJECTIVES


def test_the_readme_lists_every_objective():
    readme = (ROOT / "README.md").read_text()
    listed = re.search(r"`--objective ([a-z0-9|-]+)`", readme)
    assert listed and set(listed.group(1).split("|")) == set(OBJECTIVES)


def test_the_docs_cite_no_issue_numbers_of_trainctls_own_tracker():
    # another project's public issue stays citable when named with its repository ("aws/aws-cli issue 7700")
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for m in re.finditer(r"(\S+)\s+\(?(?:issue|issues)\s+#?\d+", path.read_text(), re.IGNORECASE):
            assert "/" in m.group(1), f"{path.name}: {m.group(0)!r}"
        assert not re.search(r"\((?:issue|issues) \d+", path.read_text()), path.name


@pytest.mark.parametrize("folder", [".", "sandbox"])
def test_the_license_is_an_spdx_string_without_deprecation_warnings(folder, monkeypatch):
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    monkeypatch.chdir(ROOT / folder)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist = Distribution()
        apply_configuration(dist, "pyproject.toml")
        dist.finalize_options()
    assert not [w for w in caught if "license" in str(w.message).lower()]
    assert dist.metadata.license_expression == "Apache-2.0"


def test_make_install_says_what_it_installs():
    recipe = (ROOT / "Makefile").read_text()
    installs = [line for line in recipe.splitlines() if "pip install" in line]
    assert installs and not any(re.search(r"\s-q\b", line) for line in installs)
    assert re.search(r"about\W+(?:\w+\W+){0,3}four minutes", recipe)  # how long the silent part of `make demo` took
    assert "6 GB" in recipe and "lighter install" in recipe   # its size, and the way around it
