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


def test_every_doc_the_makefile_and_the_docs_name_exists():
    """`make` named docs/development.md before it existed; a newcomer follows these names."""
    for path in [ROOT / "Makefile", ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for name in re.findall(r"\bdocs/[\w.-]+\.md\b", path.read_text()):
            assert (ROOT / name).is_file(), f"{path.name} names {name}, which does not exist"


def test_the_quick_start_offers_the_install_without_torch_and_its_commands_run_without_it():
    """The demo's venv is mostly CUDA libraries a machine without a GPU never uses: the Quick start says so and
    gives the lighter install (the product and the sandbox), whose example script imports no torch."""
    import ast

    quick = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "pip install . ./sandbox" in quick and "CUDA" in quick and "trainctl itself needs no torch" in quick
    assert re.search(r"make demo` took [\d.]+ minutes", quick)
    named = re.findall(r"\b((?:configs|examples)/[\w./-]+\.(?:yaml|py))\b", quick)
    assert named and all((ROOT / n).is_file() for n in named), named
    script = ROOT / "examples" / "own-script" / "train.py"
    nodes = list(ast.walk(ast.parse(script.read_text())))
    imported = {a.name.split(".")[0] for n in nodes if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in nodes if isinstance(n, ast.ImportFrom) and n.module}
    assert "torch" not in imported, imported


def _spec_sections() -> dict[str, set[str]]:
    from trainctl.spec import JobSpec

    out = {}
    for name, field in JobSpec.model_fields.items():
        kinds = [field.annotation, *getattr(field.annotation, "__args__", ())]
        fields = next((k.model_fields for k in kinds if hasattr(k, "model_fields")), None)
        if fields:
            out[name] = set(fields)
    return out


def test_every_spec_field_a_message_names_is_documented_where_users_read():
    """A message that says "set workload.data_source" sends the user to the spec's reference (README) or
    docs/your-script.md, not to docs/cost-model.md alone: every `section.field` trainctl's strings name is there."""
    import ast

    sections = _spec_sections()
    named = re.compile(r"\b(" + "|".join(sections) + r")\.([a-z_]+)\b")
    read = (ROOT / "README.md").read_text() + (ROOT / "docs" / "your-script.md").read_text()
    missing = set()
    for path in sorted((ROOT / "trainctl").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for m in named.finditer(node.value):
                    if m.group(2) in sections[m.group(1)] and not re.search(rf"\b{m.group(2)}\b", read):
                        missing.add(f"{m.group(0)} ({path.relative_to(ROOT)})")
    assert sections.keys() >= {"model", "workload", "constraints"} and not missing, sorted(missing)
