"""The terminal itself, without polars (text made safe to print on it: :mod:`traceattr.present.names`).

Apart from :mod:`traceattr.present.terminal` (the tables of an attribution, which need polars) so that
commands that print no frame (``traceattr shapes``, errors) start without importing polars.
"""

from __future__ import annotations

import os

from rich.console import Console

WIDE = 512  # --wide, or piped without COLUMNS: wider than any table traceattr draws, so none loses a column


def console(wide: bool = False) -> Console:
    """The console for stdout: the terminal's width (``COLUMNS`` when set, also when piped); piped without
    ``COLUMNS``, or with *wide*, wide enough for every column (:mod:`traceattr.present.columns` fits the tables)."""
    if wide:
        return Console(width=WIDE)
    con = Console()
    if con.is_terminal or os.environ.get("COLUMNS", "").strip().isdigit():
        return con
    return Console(width=WIDE)
