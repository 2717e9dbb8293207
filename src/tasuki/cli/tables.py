"""Tables and records for every command's output, readable at any width.

A table is drawn when it fits the terminal (or the 80 columns of a pipe, or
$COLUMNS): columns of ids, numbers and times at their full width, columns of prose
wrapped between words when they must be, never inside one. When even that does not
fit, each row is printed as a block of `field: value` lines under its first cell, as
`kubectl describe` does. Ids are never cut, folded or shortened: they are for copying.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tasuki.cli.common import console

# A prose column is never narrower than this (or its longest word): below it, a reason
# or an error reads as a column of fragments.
TEXT_FLOOR = 24
INDENT = "  "


@dataclass(frozen=True, slots=True)
class Column:
    """`whole`: the values are printed as they are, never wrapped (ids, numbers, times)."""

    name: str
    whole: bool = False
    justify: Literal["left", "right"] = "left"


def _widest_word(value: str) -> int:
    return max((cell_len(word) for word in value.split()), default=0)


def table_widths(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int
) -> list[int] | None:
    """Each column's width for a table `width` cells wide, or None when it cannot fit
    without cutting a value or breaking a word."""
    overhead = 3 * len(columns) + 1  # borders and a cell of padding each side
    natural = [
        max([cell_len(c.name)] + [max(map(cell_len, row[i].splitlines() or [""])) for row in rows])
        for i, c in enumerate(columns)
    ]
    if sum(natural) + overhead <= width:
        return natural
    floors = [
        n
        if c.whole
        else min(n, max(TEXT_FLOOR, _widest_word(c.name), *(_widest_word(r[i]) for r in rows)))
        for i, (c, n) in enumerate(zip(columns, natural, strict=True))
    ]
    spare = width - overhead - sum(floors)
    if spare < 0:
        return None
    # The spare room goes to the prose columns that need the least more first: a short
    # reason then reads on one line, and only the longest column wraps.
    widths = floors[:]
    short = sorted(range(len(columns)), key=lambda i: natural[i] - floors[i])
    for place, i in enumerate(short):
        share = spare // (len(short) - place)
        grant = min(natural[i] - floors[i], share)
        widths[i] += grant
        spare -= grant
    return widths


def table(
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    *,
    out: Console | None = None,
) -> None:
    """Print `rows` under `title`: a table if it fits the console, else one block per row."""
    out = out or console.real()
    out.print(Text(title, style="bold"), soft_wrap=True)
    if not rows:
        out.print(Text(INDENT + "(none)"), soft_wrap=True)
        return
    widths = table_widths(columns, rows, out.width)
    if widths is None:
        for row in rows:
            out.print()
            record(row[0], list(zip([c.name for c in columns[1:]], row[1:], strict=True)), out=out)
        return
    grid = Table()
    for c, w in zip(columns, widths, strict=True):
        grid.add_column(c.name, justify=c.justify, width=w, no_wrap=c.whole, overflow="fold")
    for row in rows:
        grid.add_row(*(Text(value) for value in row))
    out.print(grid)


def record_lines(heading: str, fields: Sequence[tuple[str, str]], width: int) -> list[str]:
    """A block: the heading whole on its own line, then `name: value` lines whose values
    wrap between words under themselves."""
    lines = [heading]
    if not fields:
        return lines
    label = max(cell_len(name) for name, _ in fields) + 3  # "name:" and two spaces
    room = max(width - len(INDENT) - label, TEXT_FLOOR)
    for name, value in fields:
        head = INDENT + f"{name}:".ljust(label)
        parts = value.splitlines() or [""]
        wrapped: list[str] = []
        for part in parts:
            wrapped += textwrap.wrap(
                part, room, break_long_words=False, break_on_hyphens=False
            ) or [""]
        lines.append((head + wrapped[0]).rstrip())
        lines += [INDENT + " " * label + more for more in wrapped[1:]]
    return lines


def record(heading: str, fields: Sequence[tuple[str, str]], *, out: Console | None = None) -> None:
    """Print one record as a block (see `record_lines`), its heading in bold."""
    out = out or console.real()
    first, *rest = record_lines(heading, fields, out.width)
    out.print(Text(first, style="bold"), soft_wrap=True)
    for line in rest:
        out.print(Text(line), soft_wrap=True)
