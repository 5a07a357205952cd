"""Rendering: rich tables for people, JSON for scripts (one document on stdout, nothing else).

`tables` renders plans and the catalog, `watch` a job as it runs and the job list, `launch` what a launch
is about to do. rich is imported only inside the functions that draw, so `trainctl --help` stays light."""
from __future__ import annotations

import json
import sys


def print_json(doc) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    sys.stdout.flush()


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
