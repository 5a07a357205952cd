"""`plan --plot`: expected cost against hours for every option, in plain ASCII that fits the terminal, with the
Pareto front (no other option both cheaper and faster) drawn as letters that a legend names. Pure: options
in, lines out. An axis whose values span more than a factor of 20 is logarithmic (and says so)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from trainctl.text.wrap import count

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
DOT = "."
LOG_ABOVE = 20.0           # max/min beyond which an axis is drawn on a log scale
WINDOW = 4.0               # draw options up to this many times the front's dearest cost and slowest hours


@dataclass(frozen=True)
class Axis:
    low: float
    high: float
    log: bool

    @classmethod
    def over(cls, values: Sequence[float]) -> "Axis":
        low, high = min(values), max(values)
        log = low > 0 and high / low > LOG_ABOVE
        if high == low:  # one value: give it room on both sides
            low, high = (low * 0.9, high * 1.1) if low > 0 else (low - 1, high + 1)
        return cls(low, high, log)

    def fraction(self, v: float) -> float:
        if self.log:
            return (math.log(v) - math.log(self.low)) / (math.log(self.high) - math.log(self.low))
        return (v - self.low) / (self.high - self.low)

    def at(self, fraction: float) -> float:
        if self.log:
            return math.exp(math.log(self.low) + fraction * (math.log(self.high) - math.log(self.low)))
        return self.low + fraction * (self.high - self.low)


def _money(x: float) -> str:
    return f"${x:,.2f}" if x < 100 else f"${x:,.0f}"


def _hours(x: float) -> str:
    return f"{x:.2g}" if x < 10 else f"{x:,.0f}"


def front(options: Sequence[Any]) -> list[Any]:
    """The plan's Pareto front (options marked `pareto`: no other is both cheaper and faster), cheapest first."""
    return sorted((o for o in options if o.pareto), key=lambda o: (o.expected_cost_usd, o.hours))


def window(options: Sequence[Any], pareto: Sequence[Any]) -> tuple[list[Any], str]:
    """The options worth drawing: those within WINDOW times the front's dearest cost and slowest hours (a
    layout that takes a thousand times longer would squash the trade-off into one corner), and a line on the
    rest."""
    if not pareto:
        return list(options), ""
    max_cost = WINDOW * max(o.expected_cost_usd for o in pareto)
    max_hours = WINDOW * max(o.hours for o in pareto)
    shown = [o for o in options if o.expected_cost_usd <= max_cost and o.hours <= max_hours]
    left = len(options) - len(shown)
    note = (f"{left} dearer or slower options not drawn (over {_money(max_cost)} or {_hours(max_hours)} h; "
            "the table lists them)") if left else ""
    return shown, note


def _free_cell(grid: list[list[str]], r: int, c: int) -> tuple[int, int]:
    """(r, c), or the nearest cell beside it that holds no letter yet: no front point hides another."""
    for dr, dc in ((0, 0), (0, 1), (0, -1), (-1, 0), (1, 0), (0, 2), (0, -2), (-1, 1), (1, -1), (-1, -1), (1, 1)):
        rr, cc = r + dr, c + dc
        if 0 <= rr < len(grid) and 0 <= cc < len(grid[0]) and not grid[rr][cc].isalpha():
            return rr, cc
    return r, c


def plot_lines(options: Sequence[Any], width: int, height: int = 16) -> list[str]:
    """The plot (y: expected $, x: hours), its axis labels and the legend of the front's letters."""
    if not options:
        return ["no option to plot"]
    pareto = front(options)
    drawn, note = window(options, pareto)
    x, y = Axis.over([o.hours for o in drawn]), Axis.over([o.expected_cost_usd for o in drawn])
    ticks = [_money(y.at(f)) for f in (1.0, 0.5, 0.0)]
    margin = max(len(t) for t in ticks) + 1
    cols = max(20, width - margin - 2)
    grid = [[" "] * cols for _ in range(height)]

    def cell(o) -> tuple[int, int]:
        c = min(cols - 1, round(x.fraction(o.hours) * (cols - 1)))
        r = height - 1 - min(height - 1, round(y.fraction(o.expected_cost_usd) * (height - 1)))
        return r, c

    for o in drawn:
        r, c = cell(o)
        if grid[r][c] == " ":
            grid[r][c] = DOT
    for letter, o in zip(LETTERS, pareto):  # the front is drawn last: a dot never hides it
        r, c = _free_cell(grid, *cell(o))
        grid[r][c] = letter
    lines = [f"expected $ ({'log scale, ' if y.log else ''}{count(len(drawn), 'option')}; letters: the Pareto front)"]
    for r, row in enumerate(grid):
        label = ticks[0] if r == 0 else ticks[1] if r == height // 2 else ticks[2] if r == height - 1 else ""
        lines.append(f"{label:>{margin - 1}} |{''.join(row)}".rstrip())
    lines.append(" " * margin + "+" + "-" * cols)
    left, mid, right = _hours(x.at(0.0)), _hours(x.at(0.5)), _hours(x.at(1.0))
    axis = [" "] * (cols + 1)
    for text, at in ((left, 0), (mid, cols // 2 - len(mid) // 2), (right, cols + 1 - len(right))):
        axis[at:at + len(text)] = text
    lines.append(" " * margin + "".join(axis).rstrip())
    lines.append(" " * margin + f"hours{' (log scale)' if x.log else ''}, including expected interruption rework")
    return lines + ([note] if note else []) + legend(pareto)


def legend(pareto: Sequence[Any]) -> list[str]:
    out = []
    for letter, o in zip(LETTERS, pareto):
        out.append(f"{letter} #{o.rank} {o.count}x {o.type_label} {o.market} on {o.platform}, "
                   f"{o.availability_zone or o.region}: {_money(o.expected_cost_usd)}, {o.hours:,.1f} h")
    if len(pareto) > len(LETTERS):
        out.append(f"... and {len(pareto) - len(LETTERS)} more on the front (-o json marks them: pareto)")
    return out


def print_plot(plan, spec_path: str) -> None:
    """`plan --plot` for people: the heading, the plot at the terminal's width, the legend wrapped to it."""
    import textwrap

    from trainctl.render import table_console

    con = table_console(100)
    width = con.width
    con.print(f"{plan.spec_name} ({spec_path}): expected cost against hours of {count(len(plan.options), 'option')}",
              markup=False, highlight=False)
    for line in plot_lines(plan.options, width):
        con.print(textwrap.fill(line, width=width, subsequent_indent="    ", break_on_hyphens=False)
                  if len(line) > width else line, markup=False, highlight=False, soft_wrap=True)
