"""How a ``traceattr sweep`` search reads on the terminal: its steps with their gates, then its answer
(:func:`traceattr.present.formats.search_text`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from traceattr.analysis.search_points import time_falls
from traceattr.core.records import SearchRecord
from traceattr.core.shapes import fmt_ctx
from traceattr.present.formats import decimals, interval, search_text, time_fall_text, us
from traceattr.present.names import printable


def step_lines(step: Mapping[str, Any]) -> list[str]:
    """A step as the search runs: each point measured, its side and gates, and what the search does next."""
    decision = step["decision"]
    then = f"{decision['kind']} {decision['next_ctx'] if decision.get('next_ctx') is not None else ''}"
    return [f"step {step['step']}: {p['shape']} {p['side']} (ratio {p.get('ratio')}, {p['status']}) → {then}"
            for p in step["points"]]  # fmt: skip


def render_steps(record: SearchRecord, con: Console) -> None:
    """One row per measured point: its step, ctx, who is faster (ratio above/below and interval), gates."""
    h = record.header
    table = Table(
        title=f"{h['family']}: {h.get('above', '?')} / {h.get('below', '?')} per measured ctx (ratio of medians, 95%)",
        title_justify="left",
    )
    for col in ("step", "ctx", "ratio", "interval", "verdict", "side", "fastest", "µs", "gates", "next", "s"):
        table.add_column(col, justify="right" if col in ("step", "ctx", "ratio", "µs", "s") else "left")
    for s in record.search_steps:
        for p in s.points:
            fastest = p.fastest
            d = s.decision
            cells = (
                str(s.step), fmt_ctx(p.ctx), decimals(p.ratio, 3), interval(p.low, p.high), p.verdict or "", p.side,
                fastest or "", us(p.medians_us.get(fastest) if fastest else None),
                "pass" if p.status == "pass" else f"refused: {'' if p.refused_by is None else p.refused_by}",
                fmt_ctx(d["next_ctx"]) if d.get("next_ctx") else d["kind"], decimals(s.seconds, 0),
            )  # fmt: skip
            table.add_row(*(Text(printable(c)) for c in cells))  # labels are not markup
    con.print(table)
    con.print(escape(search_text(h, record.result)), soft_wrap=True)
    for fall in time_falls(record):
        con.print(escape(f"note: {time_fall_text(*fall)}"), soft_wrap=True, highlight=False)
