"""The attribution's answer: :class:`Attribution` (ranges, placement, the wide per-op table) and its range table."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property

import polars as pl
from polars.io.plugins import register_io_source

from traceattr.attribution.columns import NO_LAUNCH, NO_LAUNCH_ID, OP_COLUMNS, RANGE_COLUMNS, ROLE_COLUMNS, UNATTRIBUTED
from traceattr.attribution.selection import RangeFilter
from traceattr.core.keys import KeyIndex, rows_at
from traceattr.trace import schema as S
from traceattr.trace.loader import Trace, TraceMeta


class OfTrace:
    """What an attribution, finished or under way, says of its trace: its meta, whether a filter chose
    the ranges."""

    trace: Trace
    select: RangeFilter

    @property
    def selected(self) -> bool:
        """Whether a domain or name filter chose the ranges."""
        return self.select.active

    @property
    def meta(self) -> TraceMeta:
        return self.trace.meta


@dataclass(frozen=True)
class Attribution(OfTrace):
    """The answer: one row per range (plus the buckets) and one row per GPU op.

    ``placement`` is the lean per-op result (role, innermost range, launch);
    ``ops`` joins it with the trace into the wide per-op table, lazily
    (``ops_lazy()``: built a slice at a time as it is read, so a writer streams it and never holds it whole).
    """

    ranges: pl.DataFrame
    placement: pl.DataFrame
    mode: str
    notes: tuple[str, ...]
    trace: Trace = field(repr=False)
    names: pl.DataFrame = field(repr=False)
    select: RangeFilter = field(default_factory=lambda: RangeFilter())
    # under a selection, each chosen range's parent among the chosen ranges (range_id, parent_id): what a call
    # owns follows this tree; the range table's parent_id is the trace's (nsys's)
    chosen_parents: pl.DataFrame | None = field(default=None, repr=False)

    @property
    def call_tree(self) -> pl.DataFrame:
        """(range_id, parent_id) of the ranges a call's subtree follows: the chosen ranges' tree under a selection."""
        if self.chosen_parents is not None:
            return self.chosen_parents
        return self.ranges.filter(pl.col("range_id").is_not_null()).select("range_id", "parent_id")

    def ops_lazy(self) -> pl.LazyFrame:
        named = self.ranges.filter(pl.col("range_id").is_not_null()).select("range_id", "name")
        return wide_ops(self.trace.gpu_ops, self.placement, self.names, named)

    def ops_at(self, op_ids: pl.Series) -> pl.DataFrame:
        """The wide per-op table's rows (OP_COLUMNS) of the ops *op_ids* (ascending), as :meth:`ops_lazy` gives
        them: a few calls' ops without building every op's row."""
        named = self.ranges.filter(pl.col("range_id").is_not_null()).select("range_id", "name")
        return wide_rows(self.trace.gpu_ops[op_ids], self.placement[op_ids], self.names.sort("name_key"),
                         KeyIndex(named, "range_id"))  # fmt: skip

    @cached_property
    def ops(self) -> pl.DataFrame:
        return self.ops_lazy().collect()


def wide_ops(gpu_ops: pl.DataFrame, placement: pl.DataFrame, names: pl.DataFrame, named: pl.DataFrame) -> pl.LazyFrame:
    """The wide per-op table (OP_COLUMNS, op_id order) as a lazy frame built a slice of ops at a time.

    *named*: ``range_id, name`` of the ranges. Every per-op frame is in op_id order with op_id == row
    (load_trace, placement_of), so a slice is positional gathers: no hash join, and string columns are
    gathered as views into the small name tables instead of copied per op. Only the slices being read
    exist at once (a whole one for 1.25 M ops was ~100 MB of gathered name views), and the frames it
    is built from are all it keeps: not the trace, not the range table.
    """
    names = names.sort("name_key")  # name_key numbers the names 0, 1, …: a key is its row
    by_range = KeyIndex(named, "range_id")

    def piece(start: int, length: int) -> pl.DataFrame:
        return wide_rows(gpu_ops.slice(start, length), placement.slice(start, length), names, by_range)

    def slices(n_rows: int | None, batch_size: int | None) -> Iterator[pl.DataFrame]:
        end = gpu_ops.height if n_rows is None else min(n_rows, gpu_ops.height)
        step = max(min(batch_size or _OPS_PER_SLICE, _OPS_PER_SLICE), 1)
        for start in range(0, end, step):
            yield piece(start, min(step, end - start))

    return python_source(piece(0, 0).schema, slices)


def wide_rows(ops: pl.DataFrame, placed: pl.DataFrame, names: pl.DataFrame, by_range: KeyIndex) -> pl.DataFrame:
    """The wide per-op rows (OP_COLUMNS) of *ops* and their *placed* rows (the same ops, in one order); *names*
    sorted by name_key (a key is its row), *by_range* the range names by range_id."""
    key = placed["name_key"]
    return (
        ops.hstack(
            [
                placed["role"],
                placed["family"],
                *(names[c].gather(key) for c in ("name", "short_name", "mangled_name")),
                placed["tid"],
                placed["api_start_ns"],
                placed["range_id"],
                by_range.rows(placed["range_id"]).to_series().alias("range_name"),
                placed["outer_range_id"],
                by_range.rows(placed["outer_range_id"]).to_series().alias("outer_range_name"),
            ]
        )
        .with_columns(
            pl.col("start").alias("start_ns"),
            pl.col("end").alias("end_ns"),
            (pl.col("end") - pl.col("start")).alias("duration_ns"),
            S.pid_from_global("global_pid").cast(pl.Int32).alias("pid"),
        )
        .select(OP_COLUMNS)  # in op_id order: kernels, then memcpy, memset, graph rows, each by rowid
    )


def python_source(
    schema: pl.Schema, frames: Callable[[int | None, int | None], Iterator[pl.DataFrame]]
) -> pl.LazyFrame:
    """A lazy frame whose rows are the frames ``frames(n_rows, batch_size)`` yields (of *schema*), made as
    a reader asks for them: a sink writes each and lets it go, and the whole table is never held."""
    # the frames carry enum columns (kind, role) as text, cast back above the source: polars before 1.3x
    # cannot take an enum column from a Python source (a panic in its import)
    enums = {c: t for c, t in schema.items() if isinstance(t, pl.Enum)}

    def source(
        columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None, batch_size: int | None
    ) -> Iterator[pl.DataFrame]:
        left = n_rows
        for part in frames(n_rows, batch_size):
            if left is not None:  # a source that cannot stop early is cut here
                part = part.head(left)
                left -= part.height
            if predicate is not None:
                part = part.filter(predicate)
            part = part.with_columns(pl.col(list(enums)).cast(pl.String))
            yield part if columns is None else part.select(columns)
            if left == 0:
                return

    text = {c: pl.String if c in enums else t for c, t in schema.items()}
    return register_io_source(source, schema=text).with_columns(pl.col(c).cast(t) for c, t in enums.items())


# ops per slice, whatever batch size the reader asks for: a slice is one morsel of a sink, and the sink holds the
# text of each morsel in flight. polars 2.1 asks for 100 k rows, ~70 MB of CSV text for these wide rows, and the
# CSV sink of the sweep's kernels peaked at ~910 MB (attribute --out; nsys stats: 634 MB). 8 k rows (~6 MB of text):
# 580-620 MB for the same CPU time within the noise (2 cores; 4 k rows cost ~1 s more in slicing)
_OPS_PER_SLICE = 8_192


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
    buckets = metrics.filter(pl.col("range_id") < 0)
    if buckets.height == 0:  # a window of a trace: its buckets come with the last window
        return named
    buckets = buckets.sort("range_id", descending=True).with_columns(  # [unattributed], then [no launch record]
        pl.when(pl.col("range_id") == NO_LAUNCH_ID)
        .then(pl.lit(NO_LAUNCH))
        .otherwise(pl.lit(UNATTRIBUTED))
        .alias("name"),
        pl.lit(None, pl.Int64).alias("range_id"),
        pl.lit(0, pl.Int64).alias("num_child"),
    )
    missing = [pl.lit(None, named.schema[c]).alias(c) for c in RANGE_COLUMNS if c not in buckets.columns]
    return pl.concat([named, buckets.with_columns(missing).select(RANGE_COLUMNS).cast(named.schema)])
