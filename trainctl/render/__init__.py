"""Rendering: rich tables for people, JSON for scripts (one document on stdout, nothing else).

`tables` renders plans and the catalog, `watch` a job as it runs and the job list, `launch` what a launch
is about to do. rich is imported only inside the functions that draw, so `trainctl --help` stays light."""
from __future__ import annotations

import json
import math
import sys


def print_json(doc) -> None:
    """The document as strict JSON: a NaN or infinity (which json.dumps writes as bare NaN/Infinity, no JSON
    parser's) becomes null."""
    sys.stdout.write(json.dumps(_finite(doc), indent=2) + "\n")
    sys.stdout.flush()


def _finite(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def stderr_console():
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def table_console(min_width: int = 120):
    """A console for tables: real terminals keep their width; pipes get room for the table."""
    from rich.console import Console

    import os

    con = Console(highlight=False)
    if not con.is_terminal and not os.environ.get("COLUMNS"):
        con = Console(highlight=False, width=max(min_width, con.width))  # pipes: wide enough, never 80
    return con
