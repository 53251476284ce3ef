"""``traceattr shapes``: the shape grammar, its presets and the published rows, read from the code.

Its own module (not beside ``profile``) so that it starts without polars or the attribution stack.
"""

from __future__ import annotations

from traceattr.cli import app
from traceattr.cli.table_options import WideOpt
from traceattr.core.callnames import AUTO, GROUP_PRESETS
from traceattr.core.shapes import DEFAULTS, HEAD_PRESETS, PUBLISHED_ROWS, parse_shape
from traceattr.present.columns import Column, dropped_line, fitted_table
from traceattr.present.console import console
from traceattr.present.names import plain_text


@app.command("shapes")
def shapes_command(wide: WideOpt = False) -> None:
    """The shape grammar, its defaults and presets, and published row names parsed."""
    from traceattr.core import shapes as module

    con = console(wide)

    def show(columns: list[Column], rows: list[list[str]], title: str) -> None:
        table, dropped = fitted_table(con, columns, rows, title)
        con.print(table)
        dropped_line(con, dropped)

    con.print(plain_text(module.__doc__ or ""), markup=False, highlight=False)
    con.print("defaults: " + ", ".join(f"{k}={v}" for k, v in DEFAULTS.items()))
    presets = [[name, str(heads)] for name, heads in HEAD_PRESETS.items()]
    show([Column("part", "left"), Column("heads")], presets, "Model presets (query heads per rank)")
    rows = []
    for name in PUBLISHED_ROWS:
        s = parse_shape(name)
        q = ",".join(map(str, s.q_lens()[:8]))
        rows.append([name, s.name, q, f"{s.batch * s.ctx * s.kv_bytes_per_token / 1e9:.2f} GB"])
    columns = [
        Column("name", "left", wraps=True), Column("canonical", "left", wraps=True, drop=2),
        Column("q per request", "left", drop=1), Column("KV bytes read"),
    ]  # fmt: skip
    show(columns, rows, "Published row names")
    groups = [[name, example] for name, (_, example) in GROUP_PRESETS.items()]
    title = "Call-name groupings (compare/report --group; or a regex with named groups)"
    show([Column("preset", "left"), Column("reads", "left", wraps=True)], groups, title)
    con.print(f"default: {', '.join(AUTO)} in turn, the first that reads any range", markup=False, highlight=False)
