"""Tables that fit the terminal: secondary columns are dropped, and said so, before any cell would be cut.

A rich table wider than its console shrinks every column and cuts cells with "…" (``fa3…``, ``2,164…``).
Here each column says whether it may go (:attr:`Column.drop`: higher goes first) and whether it holds a
name that may wrap at its spaces; numbers never wrap. Columns are dropped until the narrowest layout
fits, and the caller prints :func:`dropped_line` once per section. ``--wide`` (or output to a pipe or
file with no ``COLUMNS``) gives a console wide enough that nothing is dropped
(:func:`traceattr.present.console.console`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text


@dataclass(frozen=True)
class Column:
    head: str
    justify: Literal["left", "right"] = "right"
    drop: int = 0  # 0: always shown; otherwise the order it goes in when the table is too wide (highest first)
    wraps: bool = False  # a name: may wrap at its spaces (a number or a single word never does)


Cell = str | Text


def _need(column: Column, cells: Iterable[Cell]) -> int:
    """The narrowest this column can be with nothing cut: its longest word if it wraps, else its longest cell."""
    texts = [column.head, *(c.plain if isinstance(c, Text) else c for c in cells)]
    if column.wraps:
        return max((cell_len(word) for t in texts for line in t.splitlines() for word in line.split()), default=1)
    return max((cell_len(line) for t in texts for line in t.splitlines() or [""]), default=1)


def fitted_table(
    console: Console,
    columns: Sequence[Column],
    rows: Sequence[Sequence[Cell]],
    title: str | Text,
    *,
    fit_rows: Sequence[Sequence[Cell]] | None = None,
) -> tuple[Table, list[str]]:
    """*rows* under *columns* as a table no wider than *console*; also the heads of the columns dropped.

    *fit_rows* (default *rows*): the rows the widths are taken from, so that tables of one kind (one per
    shape) keep the same columns."""
    fit = rows if fit_rows is None else fit_rows
    needs = [_need(c, (row[i] for row in fit)) for i, c in enumerate(columns)]
    keep = list(range(len(columns)))
    dropped: list[str] = []
    # padding (1 each side) and a border per column, plus the closing border
    width = sum(needs) + 3 * len(keep) + 1
    for i in sorted((i for i, c in enumerate(columns) if c.drop), key=lambda i: (-columns[i].drop, -i)):
        if width <= console.width:
            break
        keep.remove(i)
        dropped.append(columns[i].head)
        width -= needs[i] + 3
    table = Table(title=title, title_justify="left")
    for i in keep:
        c = columns[i]
        # fold, never "…": should even the kept columns not fit, a cell wraps rather than loses its end
        table.add_column(c.head, justify=c.justify, no_wrap=not c.wraps, overflow="fold")
    for row in rows:
        table.add_row(*(row[i] if isinstance(row[i], Text) else Text(row[i]) for i in keep))
    return table, dropped


def dropped_line(console: Console, dropped: Iterable[str]) -> None:
    """One dim line naming the columns left out for width, and how to see them."""
    heads = list(dict.fromkeys(dropped))
    if heads:
        line = f"not shown at {console.width} columns: {', '.join(heads)} (--wide or a larger COLUMNS shows them)"
        console.print(Text(line, "dim"))
