"""The code's shape, checked: small modules with one job (none over 400 lines in trainctl/),
functions short enough to read (none over 60 lines; tables, i.e. functions that are one literal, aside)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "trainctl"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_module_in_trainctl_passes_400_lines():
    too_long = {str(p.relative_to(ROOT)): n for p in _modules()
                if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not too_long, f"split these modules by concern: {too_long}"


def _is_table(fn: ast.FunctionDef) -> bool:
    """A function whose body (docstring aside) is a single return of a literal: data, not logic."""
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(
        body[0].value, (ast.Dict, ast.List, ast.Tuple, ast.Set, ast.Constant))


def test_no_function_in_trainctl_passes_60_lines():
    too_long = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_table(node):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    too_long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = n
    assert not too_long, f"break these functions up: {too_long}"
