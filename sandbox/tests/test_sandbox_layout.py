"""The sandbox keeps the project's module limits: no module over 400 lines, no function over 60."""
from __future__ import annotations

import ast
from pathlib import Path

import trainctl_sandbox

PACKAGE = Path(trainctl_sandbox.__file__).parent
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def test_no_sandbox_module_or_function_is_too_long():
    too_long = []
    for path in sorted(PACKAGE.glob("*.py")):
        source = path.read_text()
        if len(source.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{path.name}: {len(source.splitlines())} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.name}:{node.lineno} {node.name}: {length} lines")
    assert too_long == []
