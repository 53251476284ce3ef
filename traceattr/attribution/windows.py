"""Cutting a trace into time windows that attribute independently (pure polars).

A time T is a *cut* when no range is open across it: every range ends before T or starts at or after
it. A launch call starting in [T_k, T_k+1) can then lie only inside ranges that start in that window
(a range holding it starts before T_k+1, so by the cut it ends before T_k+1, and it ends after T_k, so
by the other cut it starts at or after T_k). Each window's ranges, the calls starting in it and the
ops they launched are a whole attribution of their own: the same ranges hold the same ops, the same
tree, the same metrics. Attributing window after window holds one window's intermediates (the range
index, the located calls, the subtree sums) instead of the whole trace's, and a writer can take each
window's range rows as they come.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import polars as pl

if TYPE_CHECKING:
    from polars.datatypes import IntegerType

# ops per window: the intermediates of one window are a few MB; its polars calls cost 20-80 ms whatever
# its size, which is why the engine windows only traces of ~250 k ops or more (engine.WINDOWS_FROM).
# 32 k ops two at a time (engine.WINDOW_THREADS) against 64 k one at a time, `attribute --format csv
# --out` on the nested trace (300 k ops; benchmarks/HISTORY.md, seventh round): 2 cores 230-244 -> 219-230
# MB (nsys stats: 235 MB) for 1.74 -> 1.94 s (twice the windows' fixed cost, which two cores cannot
# hide); 16 cores 256-267 -> 241-248 MB (nsys: 278 MB) at the same wall, and the sweep 3.46 -> 3.13 s
WINDOW_OPS = 1 << 15


@dataclass(frozen=True)
class Window:
    """One window: rows ``[lo, hi)`` of the (start-sorted) ranges, the ids of its ops (ascending) and the
    rows of the trace's launch table that launched them; None for both: the window is the whole trace."""

    lo: int
    hi: int
    op_ids: pl.Series | None
    launch_rows: pl.Series | None
    rows: pl.DataFrame | None = None  # the window's ranges, where it is handed its own (else the caller slices them)


def cuts(ranges: pl.DataFrame, launch_starts: pl.Series, per_window: int) -> list[int]:
    """Row numbers of *ranges* (sorted by start) where a window begins, the first one 0.

    A range's start is a cut when every range before it in start order ended before it. Cuts are taken
    where the launches started before them pass another multiple of *per_window* (the first cut in each
    new multiple), so windows hold about *per_window* ops or more.
    """
    if ranges.height == 0:
        return [0]
    start = ranges["start"]
    end = ranges["end"].fill_null(pl.Int64.max())  # an unclosed range: open to the end of the trace
    reach = end.cum_max().shift(1)
    first_at = start.ne_missing(start.shift(1))  # ranges sharing a start go to the same window
    open_across = (reach >= start).fill_null(False)
    candidate = (first_at & ~open_across).arg_true()
    if candidate.len() <= 1:
        return [0]
    ops_before = launch_starts.sort().search_sorted(start.gather(candidate), side="left")
    bucket = ops_before // per_window
    new = bucket.ne_missing(bucket.shift(1)) & (bucket > 0)
    return [0, *candidate.filter(new).to_list()]


@dataclass(frozen=True)
class Planned:
    """A window before its turn: its ranges' rows and its number. The ids of its ops and launch rows are
    found when it is attributed (:meth:`window`), from one window number per op and per launch row shared
    by all the windows: holding every window's ids at once cost as much as the numbers, and sorting them
    out cost more (sweep: +25 MB at the split)."""

    lo: int
    hi: int
    k: int = 0
    op_window: pl.Series | None = None  # per op, its window (None: one window, the whole trace)
    launch_window: pl.Series | None = None  # per row of the launch table, its window

    def window(self) -> Window:
        if self.op_window is None or self.launch_window is None:
            return Window(self.lo, self.hi, None, None)
        ops = self.op_window.eq(self.k).arg_true().cast(pl.Int64)  # ascending: a scan per window, no sort
        return Window(self.lo, self.hi, ops, self.launch_window.eq(self.k).arg_true())


def split(ranges: pl.DataFrame, launches: pl.DataFrame, n_ops: int, per_window: int = WINDOW_OPS) -> list[Planned]:
    """The windows of a trace whose *ranges* are sorted by start; *launches*: one row per launched op
    (``op_id, api_start, …``). An op without a launch belongs to no range: it goes to the last window.
    One window (all ranges, every op) when no cut divides the trace."""
    rows = cuts(ranges, launches["api_start"], per_window)
    if len(rows) == 1:
        return [Planned(0, ranges.height)]
    times = ranges["start"].gather(rows[1:])
    launch_window = times.search_sorted(launches["api_start"], side="right").cast(pl.Int32)
    op_window = pl.repeat(len(rows) - 1, n_ops, dtype=pl.Int32, eager=True)
    op_window.scatter(launches["op_id"], launch_window)
    bounds = [*rows, ranges.height]
    return [Planned(bounds[k], bounds[k + 1], k, op_window, launch_window) for k in range(len(rows))]


def launches_in(launches: pl.DataFrame, window: Window) -> pl.DataFrame:
    """The launch rows of the window's ops, each op numbered by its position in the window: the
    attribution's steps look ops up by position. A copy of the window's rows only, made when it is
    attributed."""
    if window.op_ids is None or window.launch_rows is None:
        return launches
    part = launches[window.launch_rows]
    at = window.op_ids.search_sorted(part["op_id"]).cast(part.schema["op_id"])
    return part.with_columns(at.alias("op_id"))


def local(frame: pl.DataFrame, op_ids: pl.Series | None) -> pl.DataFrame:
    """*frame* (one row per op, op_id == row) at *op_ids* (a window's ops, ascending), op_id their position
    among them; None: every op, as they are."""
    if op_ids is None:
        return frame
    rows = frame[op_ids]
    return rows.with_columns(renumbered(rows))


def renumbered(frame: pl.DataFrame) -> pl.Expr:
    """*frame*'s op_id as its row number, in op_id's own integer type."""
    dtype = cast("IntegerType", frame.schema["op_id"])  # an integer column: the checker sees a DataType
    return pl.int_range(pl.len(), dtype=dtype).alias("op_id")
