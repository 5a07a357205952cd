"""Tables that fit the terminal: columns are declared most important first; at a narrow width the last ones
are left out whole (and the caption names them), never cut with an ellipsis. A column marked `wrap` (notes,
reasons) takes the room that is left and wraps at word boundaries; ids are never wrapped or cut."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from trainctl.text.safe import clean

# rich's default box draws "│ " before each cell and " " after it, and one "│" at the end: 3 characters a column
# and 1 for the edge; with pad_edge=False the first cell has no left pad and the last no right pad (2 fewer)
_PER_COLUMN = 3
_EDGES = 1 - 2
_MIN_WRAP = 10          # a wrapping column narrower than this is not worth keeping
_ROOM = 24              # prose wraps to keep more columns only when it keeps this many characters a line


@dataclass(frozen=True)
class Column:
    header: str
    cell: Callable[[Any], str]
    justify: str = "left"
    keep: bool = False     # always shown (the id the user must copy, the rank)
    wrap: bool = False     # prose: may wrap onto several lines instead of being left out


def _header_width(header: str) -> int:
    """A header may take two lines ("wall\\nhours") to leave room for more columns."""
    return max(len(line) for line in header.split("\n"))


def _choose(columns: Sequence[Column], widths: list[int], width: int, whole_prose: bool) -> tuple[list[int], int]:
    """The columns kept, most important first, and the prose column's width (0: none kept)."""
    keep, used = [], _EDGES
    for i, c in enumerate(columns):
        fits_whole = used + widths[i] + _PER_COLUMN <= width
        need = min(widths[i], _MIN_WRAP) if c.wrap and not (whole_prose and fits_whole) else widths[i]
        if c.keep or used + need + _PER_COLUMN <= width:
            keep.append(i)
            used += need + _PER_COLUMN
        elif not c.wrap:
            break  # the rest are less important than this one: leave them out too
    wrapping = [i for i in keep if columns[i].wrap]
    if not wrapping:
        return keep, 0
    i = wrapping[0]  # the prose column gets every character the others leave
    others = sum(widths[k] + _PER_COLUMN for k in keep if k != i)
    return keep, max(_MIN_WRAP, min(widths[i], width - _EDGES - others - _PER_COLUMN))


def fit(columns: Sequence[Column], rows: Sequence[Any], width: int) -> tuple[list[int], list[list[str]], int]:
    """(indices of the columns kept, every row's cells, the wrap column's width or 0). Prose is shown whole
    when it fits; it wraps instead when that keeps more columns and still leaves it _ROOM characters a line."""
    # cells are data, some a colleague wrote (the account's records): no escape sequence reaches the terminal
    cells = [[clean(c.cell(r), one_line=True) for c in columns] for r in rows]
    widths = [max([_header_width(c.header)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    keep, wrap_width = _choose(columns, widths, width, whole_prose=True)
    more, narrower = _choose(columns, widths, width, whole_prose=False)
    prose = next((widths[i] for i in more if columns[i].wrap), 0)
    if len(more) > len(keep) and narrower >= min(prose, _ROOM):
        keep, wrap_width = more, narrower
    return keep, cells, wrap_width


def fitted_table(columns: Sequence[Column], rows: Sequence[Any], width: int, title: str | None = None):
    """A rich Table of `rows` within `width` columns, with a caption naming the columns left out."""
    from rich.table import Table
    from rich.text import Text

    keep, cells, wrap_width = fit(columns, rows, width)
    t = Table(header_style="bold", pad_edge=False, title=title)
    for i in keep:
        c = columns[i]
        if c.wrap:
            t.add_column(c.header, justify=c.justify, overflow="fold", max_width=wrap_width)
        else:
            t.add_column(c.header, justify=c.justify, no_wrap=True, min_width=max(
                [_header_width(c.header)] + [len(row[i]) for row in cells]))
    for row in cells:
        t.add_row(*(Text(row[i]) for i in keep))  # cells are data (some from AWS), never markup
    left_out = [" ".join(c.header.split()) for i, c in enumerate(columns) if i not in keep]
    if left_out:
        t.caption = f"not shown at this width: {', '.join(left_out)} (-o json has every field)"
    return t


def shown_headers(columns: Sequence[Column], rows: Sequence[Any], width: int) -> list[str]:
    """The headers (one line each) of the columns `fitted_table` keeps at this width: what a footnote may explain."""
    keep, _, _ = fit(columns, rows, width)
    return [" ".join(columns[i].header.split()) for i in keep]
