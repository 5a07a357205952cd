"""What a launch shows people before it submits (the option, the decisions, every AWS call), the question
it asks, and what it prints at the end."""
from __future__ import annotations

import sys
from typing import Any

from trainctl.errors import UsageError
from trainctl.render import print_json, stderr_console


def show(option, request) -> None:
    """The chosen option, what prepare decided and why, and the numbered AWS calls submit will make (with their
    key parameters, wrapped at the terminal's width; `--dry-run -o json` has the full requests)."""
    from trainctl.render.dry_run import abbreviate_lists, calls_lines, wrap

    err = stderr_console()
    lines = [f"{request.job_id}: {option.describe()}"]
    lines += [f"  - {abbreviate_lists(note)}" for note in request.notes]
    lines += ["  " + line for line in calls_lines(request.to_json(), full="--dry-run -o json shows the requests")]
    err.print(wrap(lines, err.width), markup=False, highlight=False, soft_wrap=True)


def say(message: str) -> None:
    """A progress line ("calling s3:PutObject (code: ...)"), lists abbreviated and wrapped at the terminal's width
    between words, never inside an id, a key or a path; cleaned first (it may carry text from the user's files,
    file and script names, or from AWS)."""
    from trainctl.render.dry_run import abbreviate_lists, wrap
    from trainctl.text.safe import clean

    err = stderr_console()
    err.print(wrap([abbreviate_lists(clean(message))], err.width), markup=False, highlight=False, soft_wrap=True)


def confirm(question: str) -> bool:
    import typer

    if not sys.stdin.isatty():
        raise UsageError("no terminal to confirm the launch on: add --yes (or --dry-run to only look)")
    return typer.confirm(question, default=False, err=True)


def result(doc: Any, output: str) -> None:
    """The dry-run document (a summary that fits the terminal; -o json: the full requests) or the launched job."""
    data = doc if isinstance(doc, dict) else doc.model_dump(mode="json")
    if output == "json":
        print_json(data)
    elif isinstance(doc, dict):
        from trainctl.render import table_console
        from trainctl.render.dry_run import summary_lines, wrap

        sys.stdout.write(wrap(summary_lines(data), table_console().width) + "\n")
    else:
        sys.stdout.write(data["job_id"] + "\n")
