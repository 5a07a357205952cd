"""The folders say what code may do: the pure packages import no I/O library (a meta-path finder refuses them in a
fresh interpreter, as SkyPilot guards its thin client), a folder imports only the folders its row of
docs/architecture.md's "Imports between folders" names, and no folder or module imports itself back through
others."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "trainctl"
SANDBOX = ROOT / "sandbox"
DOC = ROOT / "docs" / "architecture.md"
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


# ----------------------------------------------------------------------------- the import graph
def all_modules() -> dict[str, Path]:
    """Every module of trainctl and of the sandbox, by dotted name."""
    found = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    for p in (SANDBOX / "trainctl_sandbox").rglob("*.py"):
        parts = p.relative_to(SANDBOX).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return found


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """Every trainctl module `path` imports, at any depth of the file (function-level imports count)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def nearest(dotted: str) -> str | None:  # `import a.b.c` of a name inside module a.b imports a.b
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(filter(None, (nearest(a.name) for a in node.names)))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.update(filter(None, [sub if sub in known else nearest(base)]))
    found.discard(name)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def import_graph() -> dict[str, set[str]]:
    mods = all_modules()
    return {name: imports_of(path, name, set(mods)) for name, path in mods.items()}


def test_no_import_cycle_between_modules():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def test_function_level_imports_count():
    graph = import_graph()
    # trainctl.usecases.launch.launch_job imports the backends inside functions only (start-up stays light)
    assert any(m.startswith("trainctl.backends") for m in graph["trainctl.usecases.launch.launch_job"])


# ----------------------------------------------------------------------------- the folder table
# What the code still does against the table, as (folder, folder it imports). Each entry names the issue whose
# work removes it; the test fails on an entry the code no longer needs, so this list only shrinks.
ALLOWED_FOR_NOW: set[tuple[str, str]] = set()  # empty: every folder keeps to its row

ROW = re.compile(r"^\| `([^`]+)` \| (.*) \|$")
NAMED = re.compile(r"`([^`]+)`")


def folder_table(text: str | None = None) -> dict[str, set[str]]:
    """docs/architecture.md's "Imports between folders": each row's folder (or single module) and what it may
    import. "every folder of `X`" allows anything under X; "`Y` and what it may import" adds Y's row."""
    text = DOC.read_text() if text is None else text
    section = text.split("## Imports between folders", 1)[1].split("\n## ", 1)[0]
    cells = {m.group(1): m.group(2) for line in section.splitlines() if (m := ROW.match(line))}
    table: dict[str, set[str]] = {}

    def allowed(unit: str) -> set[str]:
        if unit not in table:
            cell = cells[unit]
            named = {n for n in NAMED.findall(cell) if n.endswith(("/", ".py"))}
            if "every folder of" in cell:
                named = {u for u in cells if any(u.startswith(n) and u != unit for n in named)}
            if "what it may import" in cell:
                for other in list(named):
                    named |= allowed(other)
            table[unit] = named
        return table[unit]

    for unit in cells:
        allowed(unit)
    return table


def unit_of(module: str, path: Path, table: dict[str, set[str]]) -> str:
    """The row a module answers to: its own (a single module's row), else its folder's."""
    rel = path.relative_to(ROOT).as_posix()
    return rel if rel in table else rel.rpartition("/")[0] + "/"


def folder_edges(graph: dict[str, set[str]], table: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """(folder, folder it imports) -> the module imports that make the edge."""
    paths = all_modules()
    edges: dict[tuple[str, str], list[str]] = {}
    for name, targets in graph.items():
        for target in targets:
            a, b = unit_of(name, paths[name], table), unit_of(target, paths[target], table)
            if a != b:
                edges.setdefault((a, b), []).append(f"{name} -> {target}")
    return edges


def outside(edges: dict[tuple[str, str], list[str]], table: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    return {e: why for e, why in edges.items() if e[1] not in table.get(e[0], set())}


def test_every_folder_has_a_row_and_every_row_a_folder():
    table = folder_table()
    assert len(table) > 25
    units = {unit_of(n, p, table) for n, p in all_modules().items()}
    assert not units - set(table), f"folders without a row in the folder table: {sorted(units - set(table))}"
    assert not set(table) - units, f"rows for folders that do not exist: {sorted(set(table) - units)}"
    named = {n for allowed in table.values() for n in allowed}
    assert not named - set(table), f"the folder table allows folders it has no row for: {sorted(named - set(table))}"


def test_the_folder_table_has_no_cycle():
    found = cycles(folder_table())
    assert not found, f"the folder table itself has a cycle: {found}"


def test_no_import_outside_the_folder_table():
    table = folder_table()
    bad = outside(folder_edges(import_graph(), table), table)
    new = {e: why for e, why in bad.items() if e not in ALLOWED_FOR_NOW}
    assert not new, "imports outside docs/architecture.md's folder table:\n" + "\n".join(
        f"{a} -> {b}: {', '.join(sorted(why)[:3])}" for (a, b), why in sorted(new.items()))
    gone = ALLOWED_FOR_NOW - set(bad)
    assert not gone, f"ALLOWED_FOR_NOW lists imports the code no longer makes (take them out): {sorted(gone)}"


def test_no_cycle_between_folders():
    """The code's folder graph less ALLOWED_FOR_NOW: acyclic (the table's acyclicity does not cover the
    exceptions, and a cycle is named here by its folders, not its rows)."""
    table = folder_table()
    graph: dict[str, set[str]] = {}
    for a, b in folder_edges(import_graph(), table):
        if (a, b) not in ALLOWED_FOR_NOW:
            graph.setdefault(a, set()).add(b)
    found = cycles(graph)
    assert not found, f"cycles between folders: {found}"


def test_a_pure_folder_importing_the_shell_fails():
    """Issue 30's example: `planner` importing `trainctl.aws.clients` or `trainctl.backends.calls` left every
    layering test green. The same graph with that one import added must fail the table."""
    table = folder_table()
    for shell in ("trainctl.aws.clients", "trainctl.backends.calls"):
        graph = import_graph()
        graph["trainctl.planner.ranking"].add(shell)
        bad = outside(folder_edges(graph, table), table)
        assert ("trainctl/planner/", shell.rpartition(".")[0].replace(".", "/") + "/") in bad


def test_the_table_reader_reads_the_phrases():
    text = """## Imports between folders
| folder | may import |
|---|---|
| `a/` | nothing |
| `b/` | `a/` |
| `c/` | `b/` and what it may import |
| `d/` | every folder of `a/`, `c/` |
"""
    assert folder_table(text) == {"a/": set(), "b/": {"a/"}, "c/": {"a/", "b/"}, "d/": {"a/", "c/"}}
