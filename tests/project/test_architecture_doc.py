"""docs/architecture.md is the folder map: every path it names must exist, every folder and module of trainctl/
must be on it (a new one without a rule is drift), and every file a docstring or comment points at must exist."""
from __future__ import annotations

import ast
import fnmatch
import io
import re
import sysconfig
import tokenize
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


# ----------------------------------------------------------------------------- every module on the map
def folder_rows() -> list[tuple[list[str], list[str]]]:
    """The "## Folders" table: each row's folders or files (its first cell) and every name it puts in backticks."""
    section = DOC.read_text().split("## Folders", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if line.startswith("| `"):
            rows.append((re.findall(r"`([^`]+)`", line.split(" | ")[0]), re.findall(r"`([^`]+)`", line)))
    return rows


def test_every_module_of_the_package_is_on_the_map():
    """A module is on the map when the row of its folder (the deepest row that holds it) names it, by its file
    name or a path ending in it (`trainctl_*` patterns count for the entrypoints' shared modules)."""
    rows = folder_rows()
    unnamed = []
    for path in sorted((ROOT / "trainctl").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if path.name == "__init__.py":
            continue
        holders = [(len(k), names) for keys, names in rows for k in keys
                   if rel == k or (k.endswith("/") and rel.startswith(k))]
        names = max(holders)[1] if holders else []
        if not any(("/" + rel).endswith("/" + n) or fnmatch.fnmatch(path.name, n) for n in names):
            unnamed.append(rel)
    assert not unnamed, f"modules docs/architecture.md does not name in their folder's row: {unnamed}"


# ----------------------------------------------------------------------------- every path the code names
# Files of other projects that the code cites as sources (they are not ours to exist here).
OTHER_PROJECTS = {
    "src/sagemaker_training/__init__.py",          # aws/sagemaker-training-toolkit
    "modules.py", "environment.py",                # aws/sagemaker-training-toolkit
    "training.py",                                 # aws/sagemaker-pytorch-training-toolkit
    "src/sagemaker/estimator.py", "src/sagemaker/pytorch/estimator.py", "image_uris.py",  # sagemaker-python-sdk
    ".../container_drivers/common/utils.py",       # aws/sagemaker-python-sdk, sagemaker-train
    "tests/test_client_thin_install.py",           # SkyPilot
    "a.py", "b.py",                                # a list of file names as the dry run abbreviates it
}
NAMED_FILE = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w-]+\.py)\b")
CODE = ("trainctl", "sandbox", "tests", "scripts")


def prose(path: Path):
    """A file's docstrings (module, class, function) and comments: where a reader is sent to another file."""
    source = path.read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield doc
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.string


def stale_paths() -> dict[str, list[str]]:
    """Paths named in docstrings and comments that exist nowhere: a path with folders is looked up from the
    repository, the package roots, the naming file's folders and site-packages; a bare file name must be the name
    of some file of the repository."""
    site = Path(sysconfig.get_paths()["purelib"])
    roots = [ROOT, ROOT / "trainctl", ROOT / "sandbox", ROOT / "sandbox" / "trainctl_sandbox", site]
    names = {p.name for folder in CODE + ("examples", "configs") for p in (ROOT / folder).rglob("*.py")}
    found: dict[str, list[str]] = {}
    for folder in CODE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for text in prose(path):
                for named in NAMED_FILE.findall(text):
                    if named in OTHER_PROJECTS:
                        continue
                    if "/" in named:
                        ok = any((base / named).exists() for base in roots + list(path.parents))
                    else:
                        ok = named in names
                    if not ok:
                        found.setdefault(path.relative_to(ROOT).as_posix(), []).append(named)
    return found


def test_every_path_a_docstring_or_comment_names_exists():
    stale = stale_paths()
    assert not stale, "docstrings and comments name files that do not exist:\n" + "\n".join(
        f"{k}: {', '.join(v)}" for k, v in sorted(stale.items()))
