"""The tests mirror the product (docs/architecture.md, `tests/`): one folder per tier, the sandbox tier split by
command, helpers in tests/support/ and never a test file imported by another, each unit file named after the module
it tests, and the `slow` mark given by the folder (tests/conftest.py), never by hand."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
TIERS = {"unit", "cli", "sandbox", "slow", "project", "support"}


def all_test_files() -> list[Path]:
    return sorted(p for folder in (TESTS, ROOT / "sandbox" / "tests") for p in folder.rglob("*.py"))


def imported_test_modules(path: Path) -> list[str]:
    """The test files (anything under tests/ but tests/support/) and relative modules a file imports."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            found.append("." * node.level + (node.module or ""))
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        found += [n for n in names if re.match(r"tests\.(?!support\b)", n) or n.startswith(("conftest", "test_"))]
    return found


def test_no_test_file_imports_another():
    crossing = {p.relative_to(ROOT).as_posix(): m for p in all_test_files() if (m := imported_test_modules(p))}
    assert not crossing, f"test files importing test files (move the shared part to tests/support/): {crossing}"


def test_the_import_check_sees_a_test_importing_a_test(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text("from tests.sandbox.launch.test_job_args import SPEC\ndef f():\n    from .test_x import y\n"
                     "from tests.support.helpers import run_cli\n")
    assert imported_test_modules(probe) == ["tests.sandbox.launch.test_job_args", ".test_x"]


def test_each_tier_is_a_folder_and_the_sandbox_tier_is_split_by_command():
    assert {p.name for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__"} == TIERS
    assert not list((TESTS / "sandbox").glob("test_*.py")), "tests/sandbox/ holds folders by command, not files"
    assert len([p for p in (TESTS / "sandbox").iterdir() if p.is_dir() and p.name != "__pycache__"]) >= 10


def module_for(unit_test: Path) -> Path | None:
    """trainctl's file that tests/unit/test_<package>_<module>.py is named after: its name's words, split into
    folders at any underscore (`test_usecases_launch_launch_job` is trainctl/usecases/launch/launch_job.py)."""
    words = unit_test.stem.removeprefix("test_").split("_")
    for cuts in range(1 << (len(words) - 1)):
        parts, current = [], words[0]
        for i, word in enumerate(words[1:]):
            if cuts >> i & 1:
                parts.append(current)
                current = word
            else:
                current += "_" + word
        folder = ROOT / "trainctl" / Path(*parts) if parts else None
        if folder and folder.is_dir() and [p for p in folder.glob(current + ".*") if p.is_file()]:
            return folder / current
    return None


def test_every_unit_file_is_named_after_its_module():
    unnamed = [p.name for p in sorted((TESTS / "unit").glob("test_*.py")) if module_for(p) is None]
    assert not unnamed, f"unit test files not named test_<package>_<module>.py after a file of trainctl/: {unnamed}"
    assert module_for(TESTS / "unit" / "test_usecases_launch_launch_job.py") == (
        ROOT / "trainctl" / "usecases" / "launch" / "launch_job")
    assert module_for(TESTS / "unit" / "test_perf.py") is None


def marks_slow(path: Path) -> bool:
    """Whether a file names `pytest.mark.slow` (a decorator, `pytestmark`, or `pytest.param(marks=...)`)."""
    return any(isinstance(n, ast.Attribute) and n.attr == "slow" and isinstance(n.value, ast.Attribute)
               and n.value.attr == "mark" for n in ast.walk(ast.parse(path.read_text())))


def test_the_slow_mark_comes_from_the_folder_only(tmp_path):
    by_hand = [p.relative_to(ROOT).as_posix() for p in TESTS.rglob("test_*.py") if marks_slow(p)]
    assert not by_hand, f"`slow` marked by hand (tests/conftest.py marks tests/slow/ by its folder): {by_hand}"
    probe = tmp_path / "test_probe.py"
    probe.write_text("import pytest\npytestmark = pytest.mark.slow\n")
    assert marks_slow(probe)


def test_the_tests_under_slow_are_slow_and_no_others():
    """The folder's mark as pytest sees it: `-m slow` selects a file of tests/slow/ whole and nothing of tests/unit/."""
    slow, unit = "tests/slow/test_watch_fold.py", "tests/unit/test_spec_data.py"
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m",
                           "slow", slow, unit], cwd=ROOT, capture_output=True, text=True, timeout=120)
    chosen = [ln for ln in done.stdout.splitlines() if "::" in ln]
    assert chosen and all(ln.startswith(slow) for ln in chosen), done.stdout[-2000:]
    assert f"{len(chosen)}/" in done.stdout and "deselected" in done.stdout, done.stdout[-500:]


def test_test_file_names_are_unique():
    """The tiers have no __init__.py, so pytest imports each test file by its bare name: two of one name would
    collide."""
    names = [p.name for p in all_test_files() if p.name.startswith("test_")]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
