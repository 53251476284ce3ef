"""The terminal itself, without polars: a console and text made safe to print on it.

Apart from :mod:`traceattr.present.terminal` (the tables of an attribution, which need polars) so that
commands that print no frame (``traceattr shapes``, errors) start without importing polars.
"""

from __future__ import annotations

import inspect
import re

from rich.console import Console


def console() -> Console:
    """A console that is wide enough for the tables when output is not a terminal."""
    con = Console()
    return con if con.is_terminal else Console(width=160)


def plain_text(doc: str) -> str:
    """A docstring for the terminal: reST markup (``code``, roles, ``::``) taken out, the words kept."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", inspect.cleandoc(doc))  # :meth:`Shape.rank_share`
    text = re.sub(r"``([^`]+)``", r"\1", text)
    return re.sub(r"::$", ":", text, flags=re.MULTILINE)


_CONTROL = str.maketrans({c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]})


def printable(text: str) -> str:
    """*text* with control characters (newline, ESC, OSC, …) shown as ``\\xNN``: a name never moves the
    cursor, clears the screen, links, or splits a line."""
    return text.translate(_CONTROL)
