"""Python tracebacks in `watch`'s log pane, folded into one line each: torchrun prints one of about 25 lines for
every Spot interruption, which would push the job's own lines off the screen. The line names the exception
and where the full text is (`trainctl logs JOB` prints every line as it was). Pure: log lines in, log lines out.

A traceback starts with "Traceback (most recent call last):" and goes on with indented lines (frames, code),
blank lines and the chained-exception connectors, until its first unindented line: the exception itself.
Lines are followed per host and per rank prefix ("[rank0]: ...", "[default1]:..."), so ranks that print at the
same time do not mix."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Callable

START = re.compile(r"Traceback \(most recent call last\):\s*$")
PREFIX = re.compile(r"^\[[^\]\s]{1,40}\]:?\s?")
CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
MIN_FOLDED = 3            # shorter ones are shown as they are: folding would not save a line


@dataclass
class _Open:
    first: Any            # the LogLine that started it (its time and host are the folded line's)
    lines: list[str]


def _split(message: str) -> tuple[str, str]:
    m = PREFIX.match(message)
    return (m.group(0), message[m.end():]) if m else ("", message)


def _continues(body: str) -> bool:
    return not body.strip() or body[:1].isspace() or body.startswith(CHAINED) or bool(START.match(body))


def exception_of(line: str) -> str:
    """`pkg.mod.SignalException: Process 7 got signal: 15` -> `SignalException: Process 7 got signal: 15`."""
    name, sep, message = line.strip().partition(": ")
    short = name.rsplit(".", 1)[-1] if " " not in name else name
    message = message if len(message) <= 70 else message[:67] + "..."
    return f"{short}{sep}{message}"


class TracebackFolder:
    """Feed it every log line in order; it calls `emit` with the lines to show (a traceback as one line)."""

    def __init__(self, job_id: str, emit: Callable[[Any], None]):
        self.job_id, self.emit = job_id, emit
        self._open: dict[tuple[str, str], _Open] = {}

    def feed(self, ln) -> None:
        prefix, body = _split(ln.message)
        key = (ln.host, prefix)
        tb = self._open.get(key)
        if tb is None:
            if START.match(body):
                self._open[key] = _Open(ln, [ln.message])
            else:
                self.emit(ln)
            return
        tb.lines.append(ln.message)
        if not _continues(body):  # the exception line ends it
            del self._open[key]
            self._close(tb, exception_of(body))

    def flush(self) -> None:
        """The job ended (or the watch stops) inside a traceback: show what there is."""
        for key in list(self._open):
            self._close(self._open.pop(key), "")

    def _close(self, tb: _Open, exception: str) -> None:
        if len(tb.lines) < MIN_FOLDED:
            for message in tb.lines:
                self.emit(replace(tb.first, message=message))
            return
        prefix, _ = _split(tb.first.message)
        what = f", {exception}" if exception else ", unfinished"
        self.emit(replace(tb.first, message=f"{prefix}[traceback: {len(tb.lines)} lines{what}; "
                                            f"`trainctl logs {self.job_id}` shows it]"))
