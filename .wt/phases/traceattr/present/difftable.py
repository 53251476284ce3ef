"""``traceattr diff`` on the terminal: per level, before → after, the change split into count and per call.

A change in total time is two different stories: fewer (or more) calls, or
slower (or faster) calls. Each row shows both, so −31 ms from 8 fewer calls
is not read as a faster kernel. Percentages arrive in percent (the ``*_pct``
columns of :mod:`traceattr.analysis.diff`), as in diff.csv and diff.json.
"""

from __future__ import annotations

import polars as pl
from rich.console import Console
from rich.table import Table
from rich.text import Text

from traceattr.present.formats import count, ms, percent_interval, signed_ms, signed_percent, us
from traceattr.present.names import shorten

TITLES = {"total": "Totals", "kernel": "Kernels", "role": "Roles", "range": "NVTX ranges (by name)"}
HEADS = ("name", "calls", "total ms", "Δ ms", "from count", "from per call", "per call µs", "Δ per call")


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
        table = Table(title=f"{title}: before → after{more}", title_justify="left")
        for head in HEADS:
            table.add_column(head, justify="left" if head == "name" else "right", overflow="fold")
        for r in shown.iter_rows(named=True):
            table.add_row(
                Text(shorten(r["name"], 60)),
                _arrow(count(r["before_n"]), count(r["after_n"])),
                _arrow(ms(r["before_ms"]), ms(r["after_ms"])),
                f"{signed_ms(r['delta_ms'])} ({signed_percent(r['delta_pct'])})" if r["delta_pct"] is not None
                else signed_ms(r["delta_ms"]),
                signed_ms(r["count_ms"]),
                signed_ms(r["per_call_ms"]),
                _arrow(us(r["before_per_call_us"]), us(r["after_per_call_us"])),
                _per_call_change(r),
            )  # fmt: skip
        console.print(table)
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
