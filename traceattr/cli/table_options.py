"""The options of how a table is shown (``--wide``, ``--format table|csv|json``), apart from the others:
``traceattr shapes`` takes them too and must start without the attribution engine (polars) behind
:mod:`traceattr.cli.options`."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

WideOpt = Annotated[
    bool,
    typer.Option(
        "--wide",
        help="Every table column, however wide the terminal (by default secondary columns give way, "
        "and a line says which). Piped output with no COLUMNS is wide too.",
    ),
]
# --format of a command whose answer is one table: the terminal's, or its rows on stdout (nsys stats' convention)
TableFormat = Enum("TableFormat", {f: f for f in ("table", "csv", "json")}, type=str)  # type: ignore[misc]
