"""Tables that fit the terminal: columns are declared most important first; at a narrow width the last ones
are left out whole (and the caption names them), never cut with an ellipsis. A column marked `wrap` (notes,
reasons) takes the room that is left and wraps at word boundaries; ids are never wrapped or cut."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

# rich's default box draws "│ " before each cell and "│" after the last: 3 characters a column, 1 for the edge
_PER_COLUMN = 3
_MIN_WRAP = 10          # a wrapping column narrower than this is not worth keeping


@dataclass(frozen=True)
class Column:
    header: str
    cell: Callable[[Any], str]
    justify: str = "left"
    keep: bool = False     # always shown (the id the user must copy, the rank)
    wrap: bool = False     # prose: may wrap onto several lines instead of being left out


def fit(columns: Sequence[Column], rows: Sequence[Any], width: int) -> tuple[list[int], list[list[str]], int]:
    """(indices of the columns kept, every row's cells, the wrap column's width or 0)."""
    cells = [[c.cell(r) for c in columns] for r in rows]
    widths = [max([len(c.header)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    keep, used = [], 1
    for i, c in enumerate(columns):
        need = min(widths[i], _MIN_WRAP) if c.wrap else widths[i]
        if c.keep or used + need + _PER_COLUMN <= width:
            keep.append(i)
            used += need + _PER_COLUMN
        elif not c.wrap:
            break  # the rest are less important than this one: leave them out too
    wrap_width = 0
    wrapping = [i for i in keep if columns[i].wrap]
    if wrapping:  # the prose column gets every character the others leave
        i = wrapping[0]
        wrap_width = max(_MIN_WRAP, min(widths[i], width - 1 - sum(widths[k] + _PER_COLUMN for k in keep if k != i)
                                        - _PER_COLUMN))
    return keep, cells, wrap_width


def fitted_table(columns: Sequence[Column], rows: Sequence[Any], width: int, title: str | None = None):
    """A rich Table of `rows` within `width` columns, with a caption naming the columns left out."""
    from rich.table import Table

    keep, cells, wrap_width = fit(columns, rows, width)
    t = Table(header_style="bold", pad_edge=False, title=title)
    for i in keep:
        c = columns[i]
        if c.wrap:
            t.add_column(c.header, justify=c.justify, overflow="fold", max_width=wrap_width)
        else:
            t.add_column(c.header, justify=c.justify, no_wrap=True, min_width=len(max(
                [c.header] + [row[i] for row in cells], key=len)))
    for row in cells:
        t.add_row(*(row[i] for i in keep))
    left_out = [c.header for i, c in enumerate(columns) if i not in keep]
    if left_out:
        t.caption = f"not shown at this width: {', '.join(left_out)} (-o json has every field)"
    return t
