"""docs/architecture.md is the folder map: every path it names must exist, and every folder of trainctl/ must be
on it (a new folder without a rule is drift)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PATH = re.compile(r"`((?:trainctl|sandbox|tests|docs|scripts)/[A-Za-z0-9_./-]*)`")


def named_paths() -> list[str]:
    return PATH.findall(DOC.read_text())


def test_every_path_the_architecture_page_names_exists():
    paths = named_paths()
    assert len(paths) > 20
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_folder_of_the_package_is_on_the_map():
    named = set(named_paths())
    folders = sorted(str(p.relative_to(ROOT)) + "/" for p in (ROOT / "trainctl").iterdir()
                     if p.is_dir() and (p / "__init__.py").exists())
    assert folders
    unnamed = [f for f in folders if f not in named]
    assert not unnamed, f"folders without a row in docs/architecture.md: {unnamed}"


def test_the_package_has_at_most_six_top_level_modules():
    top = sorted(p.name for p in (ROOT / "trainctl").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= 6, top
