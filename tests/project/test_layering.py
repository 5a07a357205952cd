"""The folders say what code may do: the pure packages import no I/O library, and no module imports itself
back through others. SkyPilot guards its thin client the same way (tests/test_client_thin_install.py): a
meta-path finder that refuses the forbidden libraries, in a fresh interpreter."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "trainctl"
PURE = ("spec", "catalog", "perf", "planner", "iam", "naming")
FORBIDDEN = ("boto3", "botocore", "sqlite3", "rich", "typer")

BLOCKER = """
import importlib.abc, sys
FORBIDDEN = {forbidden!r}
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in FORBIDDEN:
            raise ImportError(f"pure code imported {{name}}")
        return None
sys.meta_path.insert(0, Refuse())
import importlib
for name in {modules!r}:
    importlib.import_module(name)
print("imported", len({modules!r}))
"""


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules_of(folder: str) -> list[str]:
    return sorted(module_name(p) for p in (PACKAGE / folder).rglob("*.py"))


def test_the_pure_packages_import_no_io_library():
    modules = [m for folder in PURE for m in modules_of(folder)]
    assert len(modules) > 20
    script = BLOCKER.format(forbidden=FORBIDDEN, modules=modules)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_blocker_really_refuses_a_forbidden_import():
    """The check above would pass vacuously if the finder refused nothing."""
    script = BLOCKER.format(forbidden=FORBIDDEN, modules=["trainctl.aws.clients", "boto3"])
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "imported boto3" in done.stderr


# ----------------------------------------------------------------------------- import cycles
def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py") if "entrypoints" not in p.parts
            and "bootstrap" not in p.parts}


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """Every trainctl module `path` imports, at any depth of the file (function-level imports count)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:
                    found.add(sub)
                elif base in known:
                    found.add(base)
    found.discard(name)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def import_graph() -> dict[str, set[str]]:
    mods = all_modules()
    return {name: imports_of(path, name, set(mods)) for name, path in mods.items()}


def test_no_import_cycle_between_trainctl_modules():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def test_function_level_imports_count():
    graph = import_graph()
    # trainctl.usecases.launch.launch_job imports the backends inside functions only (start-up stays light)
    assert any(m.startswith("trainctl.backends") for m in graph["trainctl.usecases.launch.launch_job"])
