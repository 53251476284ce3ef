"""Before vs after: what changed between two traces, per kernel, per role and per NVTX range name.

Each GPU op counts once (its kernel name, its role); a range name's time is
the GPU time of the ops its instances launched, nested ranges included (as
``nsys stats`` attributes). Kernel names are the export's short names
(``flash_fwd_kernel``, not the template instance). Range names are compared
without the per-instance counters PyTorch appends (``, seq = N``,
``, op_id = N``) and traceattr's own ``iter=N``, so repeated ranges add up.

The top-level total is the sum of kernel durations, ``sum(end - start)`` over
every kernel on every device, as ``nsys stats`` (``cuda_gpu_kern_sum``) and
nsys-ai's diff count it: overlapping kernels on two GPUs both count.
Rows are sorted by impact: the absolute change in time, then in count.
"""

from __future__ import annotations

import polars as pl

from traceattr.attribution.engine import Attribution
from traceattr.core.callnames import without_counters

DIFF_SCHEMA = {
    "level": pl.String, "name": pl.String,
    "before_n": pl.Int64, "after_n": pl.Int64, "delta_n": pl.Int64,
    "before_ms": pl.Float64, "after_ms": pl.Float64, "delta_ms": pl.Float64, "delta_pct": pl.Float64,
}  # fmt: skip
LEVELS = ("total", "kernel", "role", "range")
TOTAL = "GPU kernel time"  # the headline: sum of kernel durations


def _ops(att: Attribution) -> pl.DataFrame:
    # one row per GPU op (nsys mode places an op once in ops_lazy; unique guards other placements)
    return att.ops_lazy().select("op_id", "kind", "role", "short_name", "name", "duration_ns").unique("op_id").collect()


def tally(att: Attribution) -> pl.DataFrame:
    """``level, name, n, ns`` of one trace: totals, kernels, roles, range names."""
    ops = _ops(att)
    kernels = ops.filter(pl.col("kind").cast(pl.String) == "kernel")
    totals = pl.concat([
        kernels.select(pl.lit(TOTAL).alias("name"), pl.len().alias("n"), pl.col("duration_ns").sum().alias("ns")),
        ops.group_by(pl.format("{} time", pl.col("kind").cast(pl.String)).alias("name"))
        .agg(pl.len().alias("n"), pl.col("duration_ns").sum().alias("ns"))
        .filter(pl.col("name") != "kernel time"),
        ops.select(pl.lit("all GPU ops").alias("name"), pl.len().alias("n"), pl.col("duration_ns").sum().alias("ns")),
    ]).with_columns(pl.lit("total").alias("level"))  # fmt: skip
    per_kernel = kernels.group_by(pl.col("short_name").fill_null(pl.col("name")).alias("name")).agg(
        pl.len().alias("n"), pl.col("duration_ns").sum().alias("ns")
    )
    per_role = ops.group_by(pl.col("role").cast(pl.String).alias("name")).agg(
        pl.len().alias("n"), pl.col("duration_ns").sum().alias("ns")
    )
    ranges = att.ranges.filter(pl.col("range_id").is_not_null())
    per_range = ranges.group_by(without_counters(pl.col("name")).alias("name")).agg(
        pl.len().alias("n"), pl.col("gpu_sum_ns").fill_null(0).sum().alias("ns")
    )
    parts = [per_kernel.with_columns(pl.lit("kernel").alias("level")), per_role.with_columns(pl.lit("role").alias("level")),
             per_range.with_columns(pl.lit("range").alias("level"))]  # fmt: skip
    cols = [pl.col("level"), pl.col("name").cast(pl.String), pl.col("n").cast(pl.Int64), pl.col("ns").cast(pl.Int64)]
    return pl.concat([totals.select(cols), *(p.select(cols) for p in parts)])


def diff(before: Attribution, after: Attribution) -> pl.DataFrame:
    """:data:`DIFF_SCHEMA` rows: every total, kernel, role and range name of either trace, by impact per level."""
    joined = tally(before).join(tally(after), on=["level", "name"], how="full", coalesce=True, suffix="_after")
    n0, n1 = pl.col("n").fill_null(0), pl.col("n_after").fill_null(0)
    t0, t1 = pl.col("ns").fill_null(0) / 1e6, pl.col("ns_after").fill_null(0) / 1e6
    out = joined.select(
        "level", "name", n0.alias("before_n"), n1.alias("after_n"), (n1 - n0).alias("delta_n"),
        t0.alias("before_ms"), t1.alias("after_ms"), (t1 - t0).alias("delta_ms"),
        pl.when(t0 > 0).then((t1 - t0) / t0).otherwise(None).alias("delta_pct"),
    )  # fmt: skip
    order = pl.col("level").replace_strict({lvl: i for i, lvl in enumerate(LEVELS)}, return_dtype=pl.Int64)
    # totals in a fixed order (kernel time first, all GPU ops last); the rest by impact
    fixed = pl.when(pl.col("level") != "total").then(0).when(pl.col("name") == TOTAL).then(0)
    fixed = fixed.when(pl.col("name") == "all GPU ops").then(2).otherwise(1)
    return (
        out.with_columns(
            order.alias("_l"),
            fixed.alias("_f"),
            pl.col("delta_ms").abs().alias("_t"),
            pl.col("delta_n").abs().alias("_n"),
        )
        .sort(["_l", "_f", "_t", "_n", "name"], descending=[False, False, True, True, False])
        .drop("_l", "_f", "_t", "_n")
        .cast(DIFF_SCHEMA)  # type: ignore[arg-type]
    )
