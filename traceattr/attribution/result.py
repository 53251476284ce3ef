"""The attribution's answer: :class:`Attribution` (ranges, placement, the wide per-op table) and its range table."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import polars as pl

from traceattr.attribution.columns import NO_LAUNCH, NO_LAUNCH_ID, OP_COLUMNS, RANGE_COLUMNS, ROLE_COLUMNS, UNATTRIBUTED
from traceattr.attribution.selection import RangeFilter
from traceattr.core.keys import gather_by_key, rows_at
from traceattr.trace import schema as S
from traceattr.trace.loader import Trace, TraceMeta


@dataclass(frozen=True)
class Attribution:
    """The answer: one row per range (plus the buckets) and one row per GPU op.

    ``placement`` is the lean per-op result (role, innermost range, launch);
    ``ops`` joins it with the trace into the wide per-op table, lazily
    (``ops_lazy()``) so a writer can stream it instead of holding it whole.
    """

    ranges: pl.DataFrame
    placement: pl.DataFrame
    mode: str
    notes: tuple[str, ...]
    trace: Trace = field(repr=False)
    names: pl.DataFrame = field(repr=False)
    select: RangeFilter = field(default_factory=lambda: RangeFilter())

    @property
    def selected(self) -> bool:
        """Whether a domain or name filter chose the ranges."""
        return self.select.active

    @property
    def meta(self) -> TraceMeta:
        return self.trace.meta

    def ops_lazy(self) -> pl.LazyFrame:
        # Every per-op frame is in op_id order with op_id == row (load_trace,
        # placement_of), so the wide table is built by positional gathers: no
        # hash join, and string columns are gathered as views into the small
        # name tables instead of copied per op.
        ops, placed = self.trace.gpu_ops, self.placement
        names = self.names.sort("name_key")
        key = placed["name_key"]
        named = self.ranges.filter(pl.col("range_id").is_not_null()).select("range_id", "name")
        wide = ops.hstack(
            [
                placed["role"],
                placed["family"],
                *(names[c].gather(key) for c in ("name", "short_name", "mangled_name")),
                placed["tid"],
                placed["api_start_ns"],
                placed["range_id"],
                gather_by_key(named["range_id"], named["name"], placed["range_id"]).alias("range_name"),
                placed["outer_range_id"],
                gather_by_key(named["range_id"], named["name"], placed["outer_range_id"]).alias("outer_range_name"),
            ]
        )
        return (
            wide.lazy()
            .with_columns(
                pl.col("start").alias("start_ns"),
                pl.col("end").alias("end_ns"),
                (pl.col("end") - pl.col("start")).alias("duration_ns"),
                S.pid_from_global("global_pid").cast(pl.Int32).alias("pid"),
            )
            .select(OP_COLUMNS)  # in op_id order: kernels, then memcpy, memset, graph rows, each by rowid
        )

    @cached_property
    def ops(self) -> pl.DataFrame:
        return self.ops_lazy().collect()


def range_table(ranges: pl.DataFrame, metrics: pl.DataFrame, laminar: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per range in NVTX row order, then the buckets; every column of RANGE_COLUMNS.

    *metrics*: per range with ops (range_id >= 0) and per bucket; *laminar*: more ranges' metrics.
    """
    projected = metrics.filter(pl.col("range_id") >= 0)
    if laminar is not None:  # usually all of them, in the table's order: kept as they are, not copied
        projected = laminar if projected.height == 0 else pl.concat([laminar, projected])
    per_range = rows_at(projected, "range_id", ranges["range_id"])
    # nsys's NumChild counts children that have GPU ops themselves (a metrics row: at least one op)
    children = (
        ranges.select("parent_id")
        .filter(pl.col("parent_id").is_not_null() & per_range["op_records"].is_not_null())
        .group_by("parent_id")
        .agg(pl.len().cast(pl.Int64).alias("num_child"))
    )
    zero_when_empty = ["gpu_ops", "op_records", "kernels", "num_child", "streams", "devices",
                       "kernel_sum_ns", "gpu_sum_ns", "busy_ns", *ROLE_COLUMNS]  # fmt: skip
    named = (
        ranges.select(
            "name",
            "domain",
            "message",
            pl.col("style").cast(pl.String),
            "pid",
            "tid",
            "range_id",
            "parent_id",
            "level",
            pl.col("start").alias("start_ns"),
            pl.col("end").alias("end_ns"),
            (pl.col("end") - pl.col("start")).alias("duration_ns"),
            "closed",
            "payload",
        )
        .hstack(rows_at(children, "parent_id", ranges["range_id"]).get_columns())
        .hstack(per_range.get_columns())
        .with_columns([pl.col(c).fill_null(0) for c in zero_when_empty])
        .select(RANGE_COLUMNS)
    )
    buckets = (
        metrics.filter(pl.col("range_id") < 0)
        .sort("range_id", descending=True)  # [unattributed], then [no launch record]
        .with_columns(
            pl.when(pl.col("range_id") == NO_LAUNCH_ID)
            .then(pl.lit(NO_LAUNCH))
            .otherwise(pl.lit(UNATTRIBUTED))
            .alias("name"),
            pl.lit(None, pl.Int64).alias("range_id"),
            pl.lit(0, pl.Int64).alias("num_child"),
        )
    )
    missing = [pl.lit(None, named.schema[c]).alias(c) for c in RANGE_COLUMNS if c not in buckets.columns]
    return pl.concat([named, buckets.with_columns(missing).select(RANGE_COLUMNS).cast(named.schema)])
