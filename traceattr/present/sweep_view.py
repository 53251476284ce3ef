"""How a ``traceattr sweep`` reads on the terminal: its steps with their gates, then its answer
(:func:`traceattr.present.formats.sweep_text`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape

from traceattr.analysis.sweep_points import time_falls
from traceattr.core.records import SweepRecord
from traceattr.core.shapes import fmt_ctx
from traceattr.present.columns import Column, dropped_line, fitted_table, print_wrapped
from traceattr.present.formats import decimals, interval, sweep_text, time_fall_text, us
from traceattr.present.names import printable


def step_lines(step: Mapping[str, Any]) -> list[str]:
    """A step as the sweep runs: each point measured, its side and gates, and what the sweep does next."""
    decision = step["decision"]
    then = f"{decision['kind']} {decision['next_ctx'] if decision.get('next_ctx') is not None else ''}"
    return [f"step {step['step']}: {p['shape']} {p['side']} (ratio {decimals(p.get('ratio'), 3)}, {p['status']}) → {then}"
            for p in step["points"]]  # fmt: skip


def render_steps(record: SweepRecord, con: Console) -> None:
    """One row per measured point: its step, ctx, who is faster (ratio above/below and interval), gates."""
    h = record.header
    title = f"{h['family']}: {h.get('above', '?')} / {h.get('below', '?')} per measured ctx (ratio of medians, 95%)"
    # what gives way on a narrow terminal, by value to the reader: the seconds, where the sweep went next, the side
    # (the verdict says it), the fastest's µs, then the step number; ctx, the ratio with its interval, the verdict,
    # the fastest arm and the gates stay
    columns = [
        Column("step", drop=2), Column("ctx"), Column("ratio"), Column("interval", "left"), Column("verdict", "left"),
        Column("side", "left", drop=4), Column("fastest", "left"), Column("µs", drop=3),
        Column("gates", "left", wraps=True), Column("next", "left", drop=5), Column("s", drop=6),
    ]  # fmt: skip
    rows = []
    for s in record.steps_taken:
        for p in s.points:
            fastest = p.fastest
            d = s.decision
            cells = (
                str(s.step), fmt_ctx(p.ctx), decimals(p.ratio, 3), interval(p.low, p.high), p.verdict or "", p.side,
                fastest or "", us(p.medians_us.get(fastest) if fastest else None),
                "pass" if p.status == "pass" else f"refused: {'' if p.refused_by is None else p.refused_by}",
                fmt_ctx(d["next_ctx"]) if d.get("next_ctx") else d["kind"], decimals(s.seconds, 0),
            )  # fmt: skip
            rows.append([printable(c) for c in cells])  # shown as Text: labels are not markup
    table, dropped = fitted_table(con, columns, rows, title)
    con.print(table)
    dropped_line(con, dropped)
    con.print(escape(sweep_text(h, record.result)))
    for fall in time_falls(record):
        print_wrapped(con, printable(f"note: {time_fall_text(*fall)}"))
