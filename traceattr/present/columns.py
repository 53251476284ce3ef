"""The one table layer: every table traceattr prints fits its console, and no number or name is ever cut.

A rich table wider than its console shrinks every column and cuts cells with "…" (``fa3…``, ``2,164…``).
Here each column says whether it may go (:attr:`Column.drop`: higher goes first, so the order is the
reader's, not the columns' position) and whether it holds a name that may wrap at its spaces; numbers
never wrap. Columns are dropped until the narrowest layout fits, and the caller prints
:func:`dropped_line` once per section. When even the primary columns do not fit, the table is printed
as records instead: per row its first cell, then one ``head: value`` line per column (every column, as
nothing needs to give way). ``--wide`` (or output to a pipe or file with no ``COLUMNS``) gives a console
wide enough that nothing is dropped (:func:`traceattr.present.console.console`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from traceattr.present.names import SEPARATORS, name_parts

# Below this many columns no table is drawn at all: the console refuses (traceattr.present.console).
MIN_WIDTH = 20
RECORD_INDENT = 2
# A name longer than this is shortened (with "…") even in a table that fits: NVTX text can be 1,024 characters
# (see trace.validate) and would fill a screen. Call-series and kernel names are far shorter.
LONG_NAME = 200
NAME_MIN = 24  # a name column is never folded narrower than this: below it, the table is printed as records


@dataclass(frozen=True)
class Column:
    head: str
    justify: Literal["left", "right"] = "right"
    drop: int = 0  # 0: always shown; otherwise the order it goes in when the table is too wide (highest first)
    wraps: bool = False  # a name: may wrap at its spaces (a number or a single word never does)


Cell = str | Text


def _plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def _words(texts: Iterable[str]) -> int:
    return max((cell_len(word) for t in texts for line in t.splitlines() for word in line.split()), default=1)


def _lines(texts: Iterable[str]) -> int:
    return max((cell_len(line) for t in texts for line in t.splitlines() or [""]), default=1)


def _need(column: Column, cells: Iterable[Cell]) -> int:
    """The narrowest this column can be with nothing cut: a name's longest word (but not narrower than its
    longest cell or :data:`NAME_MIN`, whichever is less: text wraps into lines, not a column of words), or,
    where that word is longer than NAME_MIN, the longest piece between its separators (at least NAME_MIN: a
    kernel name folds over two or three lines, not ten); any other column's longest cell."""
    texts = [column.head, *map(_plain, cells)]
    if not column.wraps:
        return _lines(texts)
    words = [w for t in texts for w in t.split()]
    longest = max((cell_len(w) for w in words), default=1)
    if longest <= NAME_MIN:  # wrapped at spaces, but not into a column of single words
        return max(longest, min(NAME_MIN, _lines(texts[1:] or texts)))
    piece = max((cell_len(p) for w in words for p in name_parts(w)), default=1)
    return max(NAME_MIN, piece)


def _folded(cell: Cell, width: int) -> Cell:
    """A name cell in lines of at most *width*, folded after its separators where a word is longer (its
    indent kept); a cell that fits, or a styled one, as it is."""
    text = _plain(cell)
    if all(cell_len(line) <= width for line in text.splitlines() or [""]) or (isinstance(cell, Text) and cell.spans):
        return cell
    out = []
    for line in text.splitlines():
        body = line.lstrip(" ")
        indent = " " * (len(line) - len(body))
        out += [indent + part for part in _wrapped(body, width - len(indent))]
    lines = "\n".join(out)
    return Text(lines, cell.style) if isinstance(cell, Text) else lines


def _width(columns: Sequence[Column], needs: Sequence[int], keep: Sequence[int]) -> int:
    # padding (1 each side) and a border per column, plus the closing border
    return sum(needs[i] for i in keep) + 3 * len(keep) + 1


def fitted_table(
    console: Console,
    columns: Sequence[Column],
    rows: Sequence[Sequence[Cell]],
    title: str | Text,
    *,
    fit_rows: Sequence[Sequence[Cell]] | None = None,
    caption: str | Text | None = None,
) -> tuple[RenderableType, list[str]]:
    """*rows* under *columns* as a table no wider than *console* (or as records where no table fits); also
    the heads of the columns dropped.

    *fit_rows* (default *rows*): the rows the widths are taken from, so that tables of one kind (one per
    shape) keep the same columns. *caption*: the line(s) under the table."""
    fit = rows if fit_rows is None else fit_rows
    needs = [_need(c, (row[i] for row in fit)) for i, c in enumerate(columns)]
    keep = list(range(len(columns)))
    dropped: list[str] = []
    for i in sorted((i for i, c in enumerate(columns) if c.drop), key=lambda i: (-columns[i].drop, -i)):
        if _width(columns, needs, keep) <= console.width:
            break
        keep.remove(i)
        dropped.append(columns[i].head)
    for i in sorted((columns.index(c) for c in columns if c.head in dropped), key=lambda i: (columns[i].drop, i)):
        # a dropped column that fits again once a wider one went comes back, the most valuable first
        if _width(columns, needs, [*keep, i]) <= console.width:
            keep = sorted([*keep, i])
            dropped.remove(columns[i].head)
    if _width(columns, needs, keep) > console.width:
        return records(console, columns, rows, title, caption), []
    # each kept column at its need; what is left goes to the names that wrap, up to their longest line
    widths = {i: needs[i] for i in keep}
    spare = console.width - _width(columns, needs, keep)
    for i in sorted((i for i in keep if columns[i].wraps), key=lambda i: (columns[i].drop, i)):  # primary first
        full = _lines([columns[i].head, *(_plain(row[i]) for row in rows)])
        extra = min(spare, max(0, full - widths[i]))
        widths[i] += extra
        spare -= extra
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    for i in keep:
        c = columns[i]
        # fold, never "…": should a cell still be too long, it wraps rather than loses its end
        table.add_column(c.head, justify=c.justify, no_wrap=not c.wraps, overflow="fold", width=widths[i])
    for row in rows:
        cells = [_folded(row[i], widths[i]) if columns[i].wraps else row[i] for i in keep]
        table.add_row(*(c if isinstance(c, Text) else Text(c) for c in cells))
    return table, dropped


def _wrapped(text: str, width: int) -> list[str]:
    """*text* in lines of at most *width* cells, broken at its spaces; a word longer than a line (a kernel name
    on a very narrow terminal) is folded after one of its separators, every character kept."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        while cell_len(word) > width:
            if line:
                lines.append(line)
                line = ""
            cut = width
            while cell_len(word[:cut]) > width:
                cut -= 1
            # after the last separator that fits (``backend=`` | ``fa3``), so that no line ends mid-part
            seps = [i + 1 for i, ch in enumerate(word[:cut]) if ch in SEPARATORS and word[i + 1 : i + 2] != ":"]
            cut = seps[-1] if seps else cut
            lines.append(word[:cut])
            word = word[cut:]
        if not line:
            line = word
        elif cell_len(line) + 1 + cell_len(word) <= width:
            line += " " + word
        else:
            lines.append(line)
            line = word
    if line or not lines:
        lines.append(line)
    return lines


def records(
    console: Console,
    columns: Sequence[Column],
    rows: Sequence[Sequence[Cell]],
    title: str | Text,
    caption: str | Text | None = None,
) -> RenderableType:
    """The table as records, for a console too narrow for it: per row its first cell, then ``head: value``
    per other column (the value on a line of its own, indented, where both do not fit on one)."""
    width = console.width
    out: list[Text] = [Text(line, "bold") for line in _wrapped(_plain(title), width)]
    inner = width - RECORD_INDENT
    for row in rows:
        first = row[0]
        style = first.style if isinstance(first, Text) else ""
        out += [Text(line, style or "bold") for line in _wrapped(_plain(first), width)]
        for column, cell in zip(columns[1:], row[1:], strict=True):
            value = " ".join(_plain(cell).split())
            if not value:
                continue
            line = f"{column.head}: {value}"
            if cell_len(line) <= inner:
                out.append(Text(" " * RECORD_INDENT + line))
                continue
            out += [Text(" " * RECORD_INDENT + part) for part in _wrapped(f"{column.head}:", inner)]
            deeper = inner - RECORD_INDENT
            out += [Text(" " * 2 * RECORD_INDENT + part) for part in _wrapped(value, deeper)]
    if caption is not None:
        for paragraph in _plain(caption).splitlines():
            out += [Text(line) for line in _wrapped(paragraph, width)]
    return Group(*out)


def print_wrapped(console: Console, text: str, style: str = "", hang: int = 0) -> None:
    """A line of prose that may hold long words (a path, a command line) wrapped at its spaces, and a word
    longer than the console folded after a separator (``/``, ``_``, ``:``), never mid-number as rich would.
    Its leading spaces are kept, and continuation lines go *hang* columns further in (a verdict's lines)."""
    if cell_len(text) <= console.width:  # as it is, its alignment kept
        console.print(Text(text, style), no_wrap=True, overflow="ignore", crop=False)
        return
    body = text.lstrip(" ")
    lead = min(len(text) - len(body), max(0, console.width - 16))  # 16 columns left: an interval stays whole
    first, *rest = _wrapped(body, max(1, console.width - lead))
    lines = [" " * lead + first]
    if rest:
        inner = min(lead + hang, max(0, console.width - 16))
        lines += [" " * inner + part for part in _wrapped(" ".join(rest), max(1, console.width - inner))]
    for line in lines:
        console.print(Text(line, style), no_wrap=True, overflow="ignore", crop=False)


def dropped_line(console: Console, dropped: Iterable[str]) -> None:
    """One dim line naming the columns left out for width, and how to see them."""
    heads = list(dict.fromkeys(dropped))
    if heads:
        line = f"not shown at {console.width} columns: {', '.join(heads)} (--wide or a larger COLUMNS shows them)"
        console.print(Text(line, "dim"))
