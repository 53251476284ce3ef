"""``traceattr shapes``: the shape grammar, its presets and the published rows, read from the code.

Its own module (not beside ``profile``) so that it starts without polars or the attribution stack.
"""

from __future__ import annotations

from rich.table import Table

from traceattr.cli import app
from traceattr.core.callnames import AUTO, GROUP_PRESETS
from traceattr.core.shapes import DEFAULTS, HEAD_PRESETS, PUBLISHED_ROWS, parse_shape
from traceattr.present.console import console
from traceattr.present.names import plain_text


@app.command("shapes")
def shapes_command() -> None:
    """The shape grammar, its defaults and presets, and published row names parsed."""
    from traceattr.core import shapes as module

    con = console()
    con.print(plain_text(module.__doc__ or ""), markup=False, highlight=False)
    con.print("defaults: " + ", ".join(f"{k}={v}" for k, v in DEFAULTS.items()))
    table = Table(title="Model presets (query heads per rank)", title_justify="left")
    table.add_column("part")
    table.add_column("heads", justify="right")
    for name, heads in HEAD_PRESETS.items():
        table.add_row(name, str(heads))
    con.print(table)
    rows = Table(title="Published row names", title_justify="left")
    for head in ("name", "canonical", "q per request", "KV bytes read"):
        rows.add_column(head)
    for name in PUBLISHED_ROWS:
        s = parse_shape(name)
        rows.add_row(
            name, s.name, ",".join(map(str, s.q_lens()[:8])), f"{s.batch * s.ctx * s.kv_bytes_per_token / 1e9:.2f} GB"
        )
    con.print(rows)
    groups = Table(
        title="Call-name groupings (compare/report --group; or a regex with named groups)", title_justify="left"
    )
    groups.add_column("preset")
    groups.add_column("reads")
    for name, (_, example) in GROUP_PRESETS.items():
        groups.add_row(name, example)
    con.print(groups, markup=False, highlight=False)
    con.print(f"default: {', '.join(AUTO)} in turn, the first that reads any range", markup=False, highlight=False)
