"""Prose for people at the terminal's width: wrapped with a hanging indent, where a `backquoted command` is
one unit that is never split (a command cut over two lines cannot be pasted). A command wider than the
terminal gets a line of its own, whole (the terminal wraps it; a copy pastes it whole)."""
from __future__ import annotations

import re

# a command: in backquotes, or bare from "aws SERVICE ..." to " and aws", " (", ";" or the end
_COMMAND = re.compile(r"`[^`]+`|\baws [a-z0-9-]+ [^();`]*?(?=\s+and\s+aws\s|\s+\(|;|$)")
_GLUE = "\x00"  # joins the words of a command while the text is wrapped


def wrap_keeping_commands(text: str, width: int, first: str = "", rest: str = "") -> list[str]:
    """`text` as lines of at most `width` characters (a whole command on its own line may be wider): `first`
    starts the first line, `rest` indents the others."""
    glued = _COMMAND.sub(lambda m: m.group(0).replace(" ", _GLUE), text)
    lines: list[str] = []
    line, empty = first, True
    for word in glued.split():
        shown = word.replace(_GLUE, " ")
        candidate = line + shown if empty else f"{line} {shown}"
        if empty or len(candidate) <= width:
            line, empty = candidate, False
        elif len(rest + shown) > width and _GLUE in word:  # a long command: alone on its line, whole
            lines += [line, rest + shown]
            line, empty = rest, True
        else:
            lines.append(line)
            line = rest + shown
    if not empty:
        lines.append(line)
    return lines


def count(n: int, noun: str, plural: str | None = None) -> str:
    """'1 option', '2 options': a number with its noun, singular for one."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
