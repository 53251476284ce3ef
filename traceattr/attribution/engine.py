"""Attribute GPU operations to NVTX ranges (pure polars; no torch, no I/O).

nsys's rule: a GPU op belongs to a range when the CUDA API call that
launched it lies inside the range on the same thread. In ``nsys`` mode every
enclosing range gets the op (nested ranges overlap, as in ``nsys stats -r
nvtx_gpu_proj_trace``); in ``innermost`` mode each op counts once, in the
deepest enclosing range. Ops launched outside every range form the
``[unattributed]`` bucket; ops whose launch call is not in the trace (a
sliced capture) form ``[no launch record]``, which nsys silently omits.

This module runs the steps in order; each lives beside it, one job per module:
:mod:`.selection` (which ranges, their forest), :mod:`.launches` (op → launch
call → holding ranges), :mod:`.names` (one key per op identity),
:mod:`.placement` (per op: role, innermost range, launch), :mod:`.facts` (what
the metrics sum), :mod:`.subtrees` (nsys mode on laminar threads, no op ×
range pairs), :mod:`.pairs` (metrics from (op, range) pairs: innermost mode,
the buckets, the other threads), :mod:`.result` (the range table and
:class:`Attribution`), :mod:`.columns` (the vocabulary). Other layers import
from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from typing import Literal, TypeVar, get_args

import polars as pl

from traceattr.attribution.columns import (
    METRICS_SCHEMA,
    NO_LAUNCH,
    NO_LAUNCH_ID,
    OP_COLUMNS,
    RANGE_COLUMNS,
    ROLE_COLUMNS,
    UNATTRIBUTED,
    UNATTRIBUTED_ID,
)
from traceattr.attribution.facts import op_facts
from traceattr.attribution.intervals import RangeIndex
from traceattr.attribution.launches import launches_of, locate
from traceattr.attribution.names import name_keys
from traceattr.attribution.pairs import pair_metrics
from traceattr.attribution.placement import placement_of
from traceattr.attribution.result import Attribution, OfTrace, python_source, range_table, wide_ops
from traceattr.attribution.roles import RoleEnum, RoleRules
from traceattr.attribution.selection import RangeFilter, chosen_owner, usable_ranges, with_tree
from traceattr.attribution.subtrees import few_distinct
from traceattr.attribution.subtrees import subtree_metrics as _subtree_metrics  # a module global here: tests wrap it
from traceattr.attribution.windows import WINDOW_OPS as WINDOW_OPS_DEFAULT
from traceattr.attribution.windows import Planned, Window, launches_in, local, renumbered, split
from traceattr.core.cpus import usable_cpus
from traceattr.core.threads import in_order
from traceattr.trace.loader import Trace

Mode = Literal["nsys", "innermost"]
R = TypeVar("R")
MODES: tuple[str, ...] = get_args(Mode)
# nsys mode on laminar threads: projections as subtree aggregates, no op × range pairs (tests turn it
# off to hold it to the pair path).
_SUBTREES = True
# ops per time window (windows.WINDOW_OPS); None: the whole trace at once (tests set both ways)
WINDOW_OPS: int | None = WINDOW_OPS_DEFAULT
# traces with fewer ops attribute in one pass: a window costs ~200 eager polars calls whatever its size
# (20-80 ms), and below ~250 k ops the whole pass holds less than ~70 MB of intermediates. From there
# windows pay. Nested trace (300 k ops, then 5 windows of 64 k), H200 host, 4 threads: 305-310 -> 272-276
# MB (nsys stats: 284 MB) for 1.46-1.52 -> 1.56-1.67 s; 2 cores: 258-279 -> 237-242 MB at the same wall
# (noise 2.75-3.66 s). Sweep (1.25 M ops, 19 windows), 2 cores: 752-767 -> 629-638 MB for 7.45 -> 8.10 s.
WINDOWS_FROM = 1 << 18
# windows attributed side by side, at most one per usable CPU: a window is ~200 polars calls on small
# frames, mostly in polars' kernels with the GIL released, so on many cores one window's Python runs while
# the other's kernels do (H200 host: sweep 3.46 -> 3.13 s; a third thread held ~10 MB more for little)
WINDOW_THREADS = 2


def attribute(
    trace: Trace,
    mode: Mode = "nsys",
    rules: RoleRules | None = None,
    select: RangeFilter | None = None,
) -> Attribution:
    run = Attributing(trace, mode, rules, select)
    ranges = pl.concat(list(run.range_rows()))
    return run.result(ranges)


class Attributing(OfTrace):
    """One attribution under way: prepared on the whole trace, then attributed window after window.

    :meth:`range_rows` yields the range table a window at a time (then the buckets); a writer can take
    each as it comes, so only one window's intermediates and rows are held at once. After it is
    exhausted, :meth:`result` (the :class:`Attribution`) and :meth:`ops_lazy` (the per-op table) answer.
    """

    def __init__(
        self,
        trace: Trace,
        mode: Mode = "nsys",
        rules: RoleRules | None = None,
        select: RangeFilter | None = None,
        *,
        keep_calls: bool = True,
        keep_placement: bool = True,
    ) -> None:
        """*keep_calls*: keep the trace's CUDA API rows (and its strings) once the ops' launches (and names) are
        found (the :class:`Attribution` carries them for per-call analyses); a writer of the tables lets them go.
        *keep_placement*: keep every op's placement (the per-op table reads it); else only that of the ops in no
        range, which the buckets' rows are made of (a caller that reduces each window to what it needs), and of the
        trace's GPU ops only the columns attribution reads: no per-op table can be made then."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
        if select is not None and select.active and not keep_placement:
            raise ValueError("a selection moves ops to their chosen ranges once every window is read: keep_placement")
        self.trace, self.mode = trace, mode
        self.rules, self.select = rules or RoleRules.default(), select or RangeFilter()
        self.notes = list(trace.meta.notes)
        # every usable range is attributed, whatever --domain/--match choose: a filter picks rows, never the
        # facts (level, parent, children and what each range owns stay the trace's, as nsys reports them)
        ranges, dropped = usable_ranges(trace.ranges, RangeFilter())
        if dropped:
            self.notes.append(
                f"{dropped} start/end {'range' if dropped == 1 else 'ranges'} ended on another thread: not projected "
                "(nsys drops them too)"
            )
        self.ranges = ranges
        self.dedupe = trace.meta.duplicate_api_rows > 0
        # the names first: their scratch reuses what the load freed, before the launches are held too
        self.keys, self.names = name_keys(trace)
        self.roles = self.rules.decider(self.names)  # the names' side of the rules, once for every window
        launches = launches_of(trace.gpu_ops, trace.api, repeated=self.dedupe)
        if not keep_calls:
            self.trace = trace = replace(trace, api=trace.api.clear(), strings=trace.strings.clear())
        # a call logged twice can reach two chains of ranges: its ranges are no longer one subtree's ancestors
        self.subtree = mode == "nsys" and _SUBTREES and not self.dedupe and few_distinct(trace.gpu_ops)
        if not keep_placement:  # names and launches are found: the windows read these columns only
            self.trace = trace = replace(trace, gpu_ops=trace.gpu_ops.select(_FACT_COLUMNS))
        self.roles_from = None  # range rules read the op's innermost range of the whole trace: every range is here
        # windows need one launch row per op (no call logged twice), the whole trace's ranges for roles
        # and ranges in start order (as the loader leaves them)
        windowed = (
            WINDOW_OPS is not None
            and trace.gpu_ops.height >= WINDOWS_FROM
            and self.roles_from is None
            and not self.dedupe
            and ranges["start"].null_count() == 0
            and ranges["start"].is_sorted()
        )
        if windowed:
            self.windows = split(ranges, launches, trace.gpu_ops.height, WINDOW_OPS)  # type: ignore[arg-type]
        else:
            self.windows = [Planned(0, ranges.height)]
        none = ranges.clear()  # not ranges.head(0): a slice, even an empty one, holds its chunks
        # A caller that reduces each window (keep_placement off) reads no range after the windows: each window is
        # handed its own ranges (a slice of the read chunks, in start order), and neither the attribution nor its
        # trace holds the table, so each read chunk is let go once the windows have passed it (nested trace, pages
        # given back at once: 197 -> 182 MB live at the windows' end; the table is 20 MB there, 109 MB on the sweep).
        self._parts: list[pl.DataFrame] | None = None
        if not keep_placement and len(self.windows) > 1:
            self._parts = [ranges.slice(w.lo, w.hi - w.lo) for w in self.windows]
            self.trace = trace = replace(trace, ranges=trace.ranges.clear())
            self.ranges = ranges = none
        self.launches = launches
        self.keep_placement = keep_placement
        self._placed: list[pl.DataFrame] = []
        self._early: list[tuple[int, int | None]] = []  # per window: ops starting before their launch, the most
        self._empty = with_tree(none, RangeIndex(none))  # the range table's columns, for the buckets' rows
        self.placement: pl.DataFrame | None = None
        self.chosen_parents: pl.DataFrame | None = None  # a selection's tree among its chosen ranges

    def range_rows(self) -> Iterator[pl.DataFrame]:
        """The range table, a window's ranges at a time in the table's order, then the buckets."""
        if not self.select.active:
            return self.reduced(_rows_of)
        chosen = pl.col("range_id").is_null() | self.select.expr()
        return self.reduced(lambda w: w.rows.filter(chosen))

    def reduced(self, reduce: Callable[[WindowRows], R], threads: int | None = None) -> Iterator[R]:
        """*reduce* of each window's range rows (on the window's thread, so up to *threads* windows reduce side
        by side; default :data:`WINDOW_THREADS`), in the table's order, then of the buckets' rows: a caller that
        needs less than the range table (the calls of ``compare``) holds what it keeps of each window, not the
        table. Reading it through is the attribution."""
        side_by_side = WINDOW_THREADS if threads is None else threads
        threads = min(side_by_side, usable_cpus(), len(self.windows))  # one window: on this thread
        for out, placed, starts in in_order(partial(self._window, reduce=reduce), self._planned(), threads,
                                            "traceattr-window"):  # fmt: skip
            self._placed.append(placed)  # in the windows' order, whichever thread ended first
            self._early.append(starts)
            yield out
        del self.launches
        self.placement = pl.concat(self._placed)
        self._placed.clear()
        if not self.placement["op_id"].is_sorted():  # windows interleave ops of several kinds or streams
            self.placement = self.placement.sort("op_id")
        if self.select.active:  # an op belongs to the selection through its innermost chosen range, if any
            self.placement, self.chosen_parents = chosen_owner(self.placement, self.ranges, self.select)
        placement = self.placement
        orphans = placement.filter(pl.col("api_start_ns").is_null()).height
        if orphans:
            self.notes.append(
                f"{orphans} GPU {'op has' if orphans == 1 else 'ops have'} no launch record in the trace (sliced "
                f"capture): listed as {NO_LAUNCH}"
            )
        early = _before_launch(self._early, self.trace.gpu_ops.height)
        if early:
            self.notes.append(early)
        buckets = placement.filter(pl.col("range_id").is_null()).select(
            "op_id",
            pl.when(pl.col("api_start_ns").is_null())
            .then(pl.lit(NO_LAUNCH_ID, pl.Int64))
            .otherwise(pl.lit(UNATTRIBUTED_ID, pl.Int64))
            .alias("range_id"),
            pl.col("api_start_ns").alias("api_start"),
        )
        metrics = pl.DataFrame(schema=METRICS_SCHEMA)
        if buckets.height:  # the facts of these ops only, numbered in their order (a launch's ops go together)
            at = buckets["op_id"]
            placed = placement.filter(pl.col("range_id").is_null())  # the rows at `at` (all ops', or those kept)
            facts = op_facts(
                local(self.trace.gpu_ops.select(_FACT_COLUMNS), at), placed.with_columns(renumbered(placed))
            )
            metrics = pair_metrics(buckets.with_columns(renumbered(buckets)), facts)
        rows = _known_latency(range_table(self._empty, metrics))
        yield reduce(WindowRows(rows, self._empty, placement.head(0), pl.Series("op_id", [], pl.Int64)))

    def _planned(self) -> Iterator[Window]:
        """The windows' op and launch ids, each found as its window starts (held by it alone)."""
        while self.windows:
            window = self.windows.pop(0).window()
            yield window if self._parts is None else replace(window, rows=self._parts.pop(0))

    def _window(
        self, window: Window, reduce: Callable[[WindowRows], R]
    ) -> tuple[R, pl.DataFrame, tuple[int, int | None]]:
        """*reduce* of the window's range rows, its ops' placement (those in no range, without *keep_placement*),
        and how many of its ops start before their launch call, by up to how much (ns). Reads the attribution's
        frames, writes none of them: windows run side by side (reduced)."""
        ranges = self.ranges.slice(window.lo, window.hi - window.lo) if window.rows is None else window.rows
        index = RangeIndex(ranges)
        ranges = with_tree(ranges, index)
        ops = local(self.trace.gpu_ops.select(_FACT_COLUMNS), window.op_ids)
        launches = launches_in(self.launches, window)
        every, deepest = locate(index, launches, dedupe=self.dedupe, ancestors=self.mode == "nsys" and not self.subtree)
        placement = placement_of(
            local(self.keys, window.op_ids), launches, deepest, ranges, self.roles, self.roles_from
        )
        facts = op_facts(ops, placement)
        lead = placement["api_start_ns"] - ops["start"]  # both one row per op, in the window's op order
        early = (int((lead > 0).sum()), lead.max())
        del ops, lead
        # laminar threads from subtrees (in the range table's order); every holds only the other threads' pairs
        laminar = _subtree_metrics(index, deepest, facts, ranges["range_id"]) if self.subtree else None
        del index, deepest
        if self.mode == "nsys":
            assign = every
        else:
            assign = placement.filter(pl.col("range_id").is_not_null()).select(
                "op_id", "range_id", pl.col("api_start_ns").alias("api_start")
            )
        metrics = pair_metrics(assign, facts)
        del assign, every, facts
        rows = _known_latency(range_table(ranges, metrics, laminar))
        out = reduce(WindowRows(rows, ranges, placement, window.op_ids, launches))
        del launches
        if window.op_ids is not None:  # back to the trace's op ids (the window's ops in id order)
            placement = placement.with_columns(window.op_ids.cast(placement.schema["op_id"]).alias("op_id"))
        if not self.keep_placement:
            placement = placement.filter(pl.col("range_id").is_null())
        return out, placement, early

    def ranges_lazy(self) -> pl.LazyFrame:
        """The range table as a lazy frame that attributes a window as a reader (a sink) asks for its rows.
        It can be read once: reading it is the attribution."""
        rows = self.range_rows()
        first = next(rows)  # the schema, from the first window's rows
        taken = False

        def frames(n_rows: int | None, batch_size: int | None) -> Iterator[pl.DataFrame]:
            nonlocal taken
            if taken:
                raise RuntimeError("the range table is attributed as it is read: it can be read once")
            taken = True
            yield first
            yield from rows

        return python_source(first.schema, frames)

    def result(self, ranges: pl.DataFrame) -> Attribution:
        """The attribution, with *ranges* the range table :meth:`range_rows` gave (all of it)."""
        assert self.placement is not None, "range_rows() first"
        return Attribution(ranges, self.placement, self.mode, tuple(self.notes), self.trace, self.names, self.select,
                           self.chosen_parents)  # fmt: skip

    def ops_lazy(self) -> pl.LazyFrame:
        """The wide per-op table (see :meth:`Attribution.ops_lazy`), without holding the range table."""
        assert self.placement is not None, "range_rows() first"
        return wide_ops(self.trace.gpu_ops, self.placement, self.names, self.ranges.select("range_id", "name"))


# what op_facts reads of the ops: a window copies only these
_FACT_COLUMNS = ("op_id", "start", "end", "kind", "device_id", "stream_id", "correlation_id", "global_pid")


@dataclass(frozen=True)
class WindowRows:
    """One window as :meth:`Attributing.reduced` hands it over: its range rows, its NVTX ranges with their tree
    (``parent_id``, ``level``, ``root_id``), and its ops' placement, op_id their position among the window's ops;
    ``op_ids`` are those ops' ids in the trace (None: the window is the whole trace, positions are ids)."""

    rows: pl.DataFrame
    ranges: pl.DataFrame
    placement: pl.DataFrame
    op_ids: pl.Series | None
    launches: pl.DataFrame | None = None  # the ops' launch rows (op_id their position, api_id), the buckets' none


def _rows_of(window: WindowRows) -> pl.DataFrame:
    return window.rows


def _known_latency(table: pl.DataFrame) -> pl.DataFrame:
    """A launch latency below 0 is the clocks' disagreement (an op that starts before its launch call,
    see _before_launch), not a time: shown as unknown. Where no op starts early, none is below 0."""
    latency = pl.col("launch_latency_ns")
    return table.with_columns(pl.when(latency >= 0).then(latency).alias("launch_latency_ns"))


def _before_launch(windows: list[tuple[int, int | None]], ops: int) -> str | None:
    """A note when GPU ops start before the CUDA call that launched them (per window: how many, and the largest
    lead of launch over start): impossible on one clock, so the GPU and CPU timestamps disagree."""
    early = sum(n for n, _ in windows)
    if not early:
        return None
    most = max(lead for _, lead in windows if lead is not None)
    return (
        f"{early:,} of {ops:,} GPU ops start before the CUDA call that launched them (by up to "
        f"{most / 1e3:,.1f} µs: the GPU and CPU clocks disagree): launch latencies below 0 are not shown"
    )


__all__ = [
    "MODES", "NO_LAUNCH", "OP_COLUMNS", "RANGE_COLUMNS", "ROLE_COLUMNS", "UNATTRIBUTED",
    "Attribution", "Mode", "RangeFilter", "RoleEnum", "attribute",
]  # fmt: skip
