"""User-facing errors: one clear line (what, where, how to fix) and an exit code."""
from __future__ import annotations


class TrainctlError(Exception):
    """An error the user can act on. `str(e)` is the whole message; no traceback is shown."""

    exit_code = 1

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(TrainctlError):
    """Bad input from the user (a spec, a flag, a file): exit code 2."""

    exit_code = 2
