"""The terminal itself, without polars (text made safe to print on it: :mod:`traceattr.present.names`).

Apart from :mod:`traceattr.present.terminal` (the tables of an attribution, which need polars) so that
commands that print no frame (``traceattr shapes``, errors) start without importing polars.
"""

from __future__ import annotations

from rich.console import Console


def console() -> Console:
    """A console that is wide enough for the tables when output is not a terminal."""
    con = Console()
    return con if con.is_terminal else Console(width=160)
