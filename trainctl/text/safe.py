"""Text that came from AWS or from a job (log lines, failure reasons, status messages, error messages), made
safe to print on a terminal.

A job's log line, or a message an attacker can get into an AWS error, may carry terminal control sequences:
ESC [ 2 J clears the screen, OSC 52 writes the clipboard, a bare CR overwrites what was printed, bidi
overrides reorder what the reader sees. `clean` removes whole escape sequences (CSI, OSC, DCS/SOS/PM/APC,
7-bit and 8-bit forms), then every other C0/C1 control character and the bidi controls; it keeps tab and,
unless asked for one line, newline. `plain` wraps the result in a rich `Text`, which rich never parses as
markup, so a stray `[/]` prints as it is instead of raising MarkupError.
"""
from __future__ import annotations

import re

# ESC or its 8-bit form, then a CSI (ESC [ ... final byte), a string command (OSC ESC ], DCS P, SOS X,
# PM ^, APC _) up to BEL or ST, or a two-byte escape.
_SEQUENCE = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
                       r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
                       r"|\x1b[ -~]?")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clean(text: object, one_line: bool = False) -> str:
    """The text without escape sequences or control characters (tab kept; newline kept unless one_line)."""
    s = _SEQUENCE.sub("", "" if text is None else str(text))
    if one_line:
        s = s.replace("\r\n", " ").replace("\n", " ")
    return _CONTROL.sub("", s)


def plain(text: object, one_line: bool = False, style: str = ""):
    """`clean(text)` as a rich Text: printed literally, never parsed as markup."""
    from rich.text import Text

    return Text(clean(text, one_line), style=style)
