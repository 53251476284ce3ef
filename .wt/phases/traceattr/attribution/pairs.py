"""Range metrics from (op, range) pairs: innermost mode, the buckets, and nsys mode where subtrees cannot serve."""

from __future__ import annotations

import polars as pl

from traceattr.attribution.columns import METRICS_SCHEMA
from traceattr.attribution.facts import SumPlan
from traceattr.attribution.intervals import _MAX_KEY


def pair_metrics(assign: pl.DataFrame, facts: pl.DataFrame) -> pl.DataFrame:
    """Per range_id: projection, op counts, kernel/busy/gap time, latency, role sums.

    Segment reductions instead of a group-by: sorted by (range, x), each
    range's rows are one run at the same positions whatever x is, so a sum is
    a difference of running sums at the run ends and a min/max is a run's
    first/last row. Hundreds of thousands of tiny groups cost a hash group-by
    several times more than these sorts; the few polars calls matter too.
    """
    at = assign["op_id"]
    rows = assign.select("range_id", "api_start").hstack([facts[c].gather(at) for c in facts.columns])
    if rows.height == 0:
        return pl.DataFrame(schema=METRICS_SCHEMA)
    new_run = pl.col("range_id").ne_missing(pl.col("range_id").shift(1))
    if not _in_order(rows, "start"):  # ops launched in range and start order (innermost mode) come sorted
        rows = rows.sort("range_id", "start")

    def by_range(col: str, **nulls: bool) -> pl.Expr:  # *col* sorted within each range, if it is not yet
        return pl.col(col) if _in_order(rows, col) else pl.col(col).sort_by("range_id", col, **nulls)

    def new_value(col: str) -> pl.Expr:  # first row of a run, or a value unlike the previous row's
        by = by_range(col)
        return (new_run | by.ne_missing(by.shift(1))).cast(pl.Int64)

    one = {col: facts[col].n_unique() == 1 for col in ("stream", "device_id")}  # one in the whole trace: 1 per range
    rows = rows.with_columns(
        by_range("end").alias("_end_by"),
        by_range("api_start", nulls_last=True).alias("_api_by"),
        *(new_value(col).alias(f"_new_{col}") for col in one if not one[col]),
        new_run.cast(pl.Int64).cum_sum().sub(1).alias("_run"),
        (pl.col("end") - pl.col("start")).alias("_dur"),
    )
    first = rows.select(new_run.arg_true())["range_id"]
    last = pl.concat([first.slice(1) - 1, pl.Series([rows.height - 1], dtype=first.dtype)])
    runs = rows.select(
        pl.col("range_id").gather(first),
        pl.col("start").gather(first).alias("gpu_start_ns"),
        pl.col("_end_by").gather(last).alias("gpu_end_ns"),
        pl.col("_api_by").gather(first).alias("_first_api"),
    )
    count = (last - first + 1).cast(pl.Int64)
    plan = SumPlan.of(rows)
    dur = pl.col("_dur")
    sums = {"gpu_sum_ns": dur, "busy_ns": _covered(rows, runs), **plan.summed(dur)}
    sums |= {
        name: pl.col(f"_new_{col}") for name, col in (("streams", "stream"), ("devices", "device_id")) if not one[col]
    }
    ends = rows.select(e.cast(pl.Int64).cum_sum().alias(k) for k, e in sums.items())[last]
    totals = ends.select(pl.all() - pl.all().shift(1, fill_value=0))
    ones = pl.ones(count.len(), dtype=pl.Int64, eager=True)
    fixed = plan.derived(count, totals["gpu_sum_ns"])
    fixed |= {name: ones for name, col in (("streams", "stream"), ("devices", "device_id")) if one[col]}
    return (
        runs.hstack(totals)
        .hstack([series.alias(name) for name, series in fixed.items()])
        .with_columns(
            pl.Series("op_records", count),
            (pl.col("gpu_end_ns") - pl.col("gpu_start_ns")).alias("gpu_span_ns"),
            (pl.col("gpu_start_ns") - pl.col("_first_api")).alias("launch_latency_ns"),
        )
        .with_columns((pl.col("gpu_span_ns") - pl.col("busy_ns")).alias("gap_ns"))
        .select(list(METRICS_SCHEMA))
    )


def _in_order(rows: pl.DataFrame, col: str) -> bool:
    """*rows* sorted by (range_id, *col*) already, neither null: a check costs far less than a sort."""
    if rows["range_id"].null_count() or rows[col].null_count():
        return False
    rid, value = pl.col("range_id"), pl.col(col)
    step = (rid > rid.shift(1)) | ((rid == rid.shift(1)) & (value >= value.shift(1)))
    return bool(rows.select(step.fill_null(True).all()).item())  # the first row has no previous one


def _covered(rows: pl.DataFrame, runs: pl.DataFrame) -> pl.Expr:
    """Per row of *rows* (sorted by range, start): the time it adds to its range's union.

    An interval adds only what reaches past the furthest end seen before it in
    its range. Runs are laid end to end on one axis (each shifted to begin
    where the previous one ended), so one running maximum serves them all.
    """
    extent = runs["gpu_end_ns"] - runs["gpu_start_ns"] + 1
    start, end = pl.col("start"), pl.col("end")
    if int(extent.sum()) < _MAX_KEY:
        shift = pl.lit(extent.cum_sum() - extent - runs["gpu_start_ns"]).gather(pl.col("_run"))
        start, end = start + shift, end + shift
        prior = end.cum_max().shift(1)
    else:  # too wide for one axis: a running maximum per range (slower, same answer)
        prior = end.cum_max().shift(1).over("_run")
    return (end - pl.max_horizontal(start, prior)).clip(lower_bound=0)
