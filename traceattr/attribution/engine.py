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

from typing import Literal, get_args

import polars as pl

from traceattr.attribution.columns import (
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
from traceattr.attribution.result import Attribution, range_table
from traceattr.attribution.roles import RoleEnum, RoleRules
from traceattr.attribution.selection import RangeFilter, usable_ranges, with_tree
from traceattr.attribution.subtrees import few_distinct
from traceattr.attribution.subtrees import subtree_metrics as _subtree_metrics  # a module global here: tests wrap it
from traceattr.trace.loader import Trace

Mode = Literal["nsys", "innermost"]
MODES: tuple[str, ...] = get_args(Mode)
# nsys mode on laminar threads: projections as subtree aggregates, no op × range pairs (tests turn it
# off to hold it to the pair path).
_SUBTREES = True


def attribute(
    trace: Trace,
    mode: Mode = "nsys",
    rules: RoleRules | None = None,
    select: RangeFilter | None = None,
) -> Attribution:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
    rules = rules or RoleRules.default()
    notes = list(trace.meta.notes)

    ranges, dropped = usable_ranges(trace.ranges, select or RangeFilter())
    if dropped:
        notes.append(f"{dropped} start/end ranges ended on another thread: not projected (nsys drops them too)")
    index = RangeIndex(ranges)
    ranges = with_tree(ranges, index)

    dedupe = trace.meta.duplicate_api_rows > 0
    launches = launches_of(trace.gpu_ops, trace.api, repeated=dedupe)
    # a call logged twice can reach two chains of ranges: its ranges are no longer one subtree's ancestors
    subtree = mode == "nsys" and _SUBTREES and not dedupe and few_distinct(trace.gpu_ops)
    every, deepest = locate(index, launches, dedupe=dedupe, ancestors=mode == "nsys" and not subtree)
    keys, names = name_keys(trace)
    roles_from = None
    if (select or RangeFilter()).active and any(r.range is not None for r in rules.rules):
        # a range rule (the L2 flush's) reads the op's innermost range of the whole trace, not of the
        # selection: a role belongs to the op, and --match must not turn the flush into a copy
        every_range, _ = usable_ranges(trace.ranges, RangeFilter())
        full = RangeIndex(every_range)
        _, full_deepest = locate(full, launches, dedupe=dedupe, ancestors=False)
        roles_from = (full_deepest, with_tree(every_range, full))
        del full
    placement = placement_of(keys, launches, deepest, ranges, names, rules, roles_from)
    del launches
    orphans = placement.filter(pl.col("api_start_ns").is_null()).height
    if orphans:
        notes.append(f"{orphans} GPU ops have no launch record in the trace (sliced capture): listed as {NO_LAUNCH}")

    early = _before_launch(trace.gpu_ops, placement)
    if early:
        notes.append(early)
    facts = op_facts(trace.gpu_ops, placement)
    # laminar threads from subtrees (in the range table's order); every holds only the other threads' pairs
    laminar = _subtree_metrics(index, deepest, facts, ranges["range_id"]) if subtree else None
    del index, deepest
    if mode == "nsys":
        assign = every
    else:
        assign = placement.filter(pl.col("range_id").is_not_null()).select(
            "op_id", "range_id", pl.col("api_start_ns").alias("api_start")
        )
    buckets = placement.filter(pl.col("range_id").is_null()).select(
        "op_id",
        pl.when(pl.col("api_start_ns").is_null())
        .then(pl.lit(NO_LAUNCH_ID, pl.Int64))
        .otherwise(pl.lit(UNATTRIBUTED_ID, pl.Int64))
        .alias("range_id"),
        pl.col("api_start_ns").alias("api_start"),
    )
    metrics = pair_metrics(pl.concat([assign, buckets]), facts)
    del assign, every, facts
    table = range_table(ranges, metrics, laminar)
    if early:  # a negative latency is the clocks' disagreement, not a time: shown as unknown
        latency = pl.col("launch_latency_ns")
        table = table.with_columns(pl.when(latency >= 0).then(latency).alias("launch_latency_ns"))
    return Attribution(table, placement, mode, tuple(notes), trace, names, select or RangeFilter())


def _before_launch(gpu_ops: pl.DataFrame, placement: pl.DataFrame) -> str | None:
    """A note when GPU ops start before the CUDA call that launched them (*placement* is in op_id
    order, one row per op): impossible on one clock, so the GPU and CPU timestamps disagree."""
    lead = placement["api_start_ns"] - gpu_ops["start"]
    early = int((lead > 0).sum())
    if not early:
        return None
    return (
        f"{early:,} of {gpu_ops.height:,} GPU ops start before the CUDA call that launched them (by up to "
        f"{lead.max() / 1e3:,.1f} µs: the GPU and CPU clocks disagree): launch latencies below 0 are not shown"
    )


__all__ = [
    "MODES", "NO_LAUNCH", "OP_COLUMNS", "RANGE_COLUMNS", "ROLE_COLUMNS", "UNATTRIBUTED",
    "Attribution", "Mode", "RangeFilter", "RoleEnum", "attribute",
]  # fmt: skip
