"""The sandbox keeps the project's module limits (no module over 400 lines, no function over 60) in every
subpackage, keeps its top level to the entry points, and names only extension modules that exist."""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import trainctl_sandbox
from trainctl_sandbox.server import main as server_main

PACKAGE = Path(trainctl_sandbox.__file__).parent
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
# What must sit at the top: the plugin's entry point (cli), the pytest plugin the conftests name
# (testing), and the public admin client (README: trainctl_sandbox.admin.SandboxAdmin).
TOP_LEVEL = {"__init__.py", "admin.py", "cli.py", "testing.py"}


def test_no_sandbox_module_or_function_is_too_long():
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        source = path.read_text()
        if len(source.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{name}: {len(source.splitlines())} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{name}:{node.lineno} {node.name}: {length} lines")
    assert too_long == []


def test_the_length_check_sees_the_subpackages():
    checked = {path.relative_to(PACKAGE).parts[0] for path in PACKAGE.rglob("*.py")}
    assert {"server", "ec2", "market", "sagemaker", "faults"} <= checked


def test_the_top_level_holds_only_the_entry_points():
    assert {path.name for path in PACKAGE.glob("*.py")} == TOP_LEVEL


def _exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package that is gone
        return False


def test_every_extension_the_server_installs_exists():
    # The server skips an optional extension whose module it cannot find: a stale path there would
    # switch SageMaker training jobs off without an error. Every name it lists must resolve.
    names = server_main.CORE_EXTENSIONS + server_main.OPTIONAL_EXTENSIONS + server_main.EC2_EXTENSIONS
    assert [name for name in names if not _exists(name)] == []
    assert "trainctl_sandbox.sagemaker.jobs" in server_main.OPTIONAL_EXTENSIONS
