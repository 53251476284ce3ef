"""``traceattr diff`` on the terminal: per level, before → after, the change split into count and per call.

A change in total time is two different stories: fewer (or more) calls, or
slower (or faster) calls. Each row shows both, so −31 ms from 8 fewer calls
is not read as a faster kernel. Percentages arrive in percent (the ``*_pct``
columns of :mod:`traceattr.analysis.diff`), as in diff.csv and diff.json.
"""

from __future__ import annotations

import polars as pl
from rich.console import Console

from traceattr.present.columns import LONG_NAME, Column, dropped_line, fitted_table
from traceattr.present.formats import count, ms, percent_interval, signed_ms, signed_percent, us
from traceattr.present.names import shorten

TITLES = {"total": "Totals", "kernel": "Kernels", "role": "Roles", "range": "NVTX ranges (by name)"}
# by value to the reader: the name, the totals and their change stay; the split of the change and the per-call
# times go first, the per-call change (with its verdict) last
COLUMNS = (
    Column("name", "left", wraps=True), Column("calls"), Column("total ms"), Column("Δ ms"),
    Column("from count", drop=4), Column("from per call", drop=3), Column("per call µs", drop=2),
    Column("Δ per call", drop=1),
)  # fmt: skip


def _arrow(before: str, after: str) -> str:
    return f"{before} → {after}"


def _per_call_change(r: dict) -> str:
    """``+0.2%``, with the interval and verdict where several captures a side give one."""
    text = signed_percent(r["per_call_pct"])
    if r["per_call_verdict"] is not None:
        text += f" {percent_interval(r['per_call_low_pct'], r['per_call_high_pct'])} {r['per_call_verdict']}"
    return text


def render_diff(d: pl.DataFrame, console: Console, top: int = 15, captures: tuple[int, int] = (1, 1)) -> None:
    """Before → after per level (totals, kernels, roles, range names), the largest changes first.

    *captures*: how many captures each side pooled (their medians are shown; the interval needs two a side)."""
    for level, title in TITLES.items():
        part = d.filter(pl.col("level") == level)
        if part.height == 0:
            continue
        shown = part if level in ("total", "role") or top <= 0 else part.head(top)
        more = f" (top {shown.height} of {part.height} by |Δ time|)" if shown.height < part.height else ""
        rows = [
            [
                shorten(r["name"], LONG_NAME),
                _arrow(count(r["before_n"]), count(r["after_n"])),
                _arrow(ms(r["before_ms"]), ms(r["after_ms"])),
                f"{signed_ms(r['delta_ms'])} ({signed_percent(r['delta_pct'])})" if r["delta_pct"] is not None
                else signed_ms(r["delta_ms"]),
                signed_ms(r["count_ms"]),
                signed_ms(r["per_call_ms"]),
                _arrow(us(r["before_per_call_us"]), us(r["after_per_call_us"])),
                _per_call_change(r),
            ]
            for r in shown.iter_rows(named=True)
        ]  # fmt: skip
        table, dropped = fitted_table(console, COLUMNS, rows, f"{title}: before → after{more}")
        console.print(table)
        dropped_line(console, dropped)
    b, a = captures
    pooled = (
        f"Each side: the medians over its captures ({b} before, {a} after); Δ per call: 95% interval over captures, with two or more on each side."
        if b > 1 or a > 1
        else "One capture a side: no interval on the per-call change (give several: diff A/ B/, or a1 a2 vs b1 b2)."
    )
    console.print(
        "Δ ms = from count (the change in calls × the time per call before) + from per call (the change in time "
        f"per call × the calls after). Per call: total ÷ calls; diff.csv also has each name's median instance. {pooled}"
    )
