"""The terminal itself, without polars (text made safe to print on it: :mod:`traceattr.present.names`).

Apart from :mod:`traceattr.present.terminal` (the tables of an attribution, which need polars) so that
commands that print no frame (``traceattr shapes``, errors) start without importing polars.
"""

from __future__ import annotations

import os

from rich.console import Console

from traceattr.core.errors import TraceattrError
from traceattr.present.columns import MIN_WIDTH

WIDE = 512  # --wide, or piped without COLUMNS: wider than any table traceattr draws, so none loses a column


def _columns() -> int | None:
    """``COLUMNS`` as a width, None where unset or not a number (rich ignores those too); a width too narrow for
    even one record line is refused here, before any output, rather than printed as nothing or cut."""
    text = os.environ.get("COLUMNS", "").strip()
    if not text.isdigit():
        return None
    width = int(text)
    if width < MIN_WIDTH:
        raise TraceattrError(
            f"COLUMNS={width}: narrower than the {MIN_WIDTH} columns traceattr prints in; "
            "set a larger COLUMNS, unset it, or give --wide (or --format csv|json where the command has it)"
        )
    return min(width, 100_000)  # a huge COLUMNS prints tables at their natural width anyway


def console(wide: bool = False) -> Console:
    """The console for stdout: the terminal's width (``COLUMNS`` when set, also when piped); piped without
    ``COLUMNS``, or with *wide*, wide enough for every column (:mod:`traceattr.present.columns` fits the tables)."""
    if wide:
        return Console(width=WIDE)
    width = _columns()
    if width is not None:
        return Console(width=width)
    con = Console()
    return con if con.is_terminal else Console(width=WIDE)
