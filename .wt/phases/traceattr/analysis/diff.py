"""Before vs after: what changed between two traces (or two sets of captures), per kernel, role and range name.

Each GPU op counts once (its kernel name, its role); a range name's time is
the GPU time of the ops its instances launched, nested ranges included (as
``nsys stats`` attributes). Kernel names are the export's short names
(``flash_fwd_kernel``, not the template instance). Range names are compared
without the per-instance counters (:func:`traceattr.core.callnames.without_counters`:
PyTorch's ``, seq = N`` / ``, op_id = N``, traceattr's ``arm=X`` and ``iter=N``),
so repeated ranges add up and one backend in two runs is one row.

The top-level total is the sum of kernel durations, ``sum(end - start)`` over
every kernel on every device, as ``nsys stats`` (``cuda_gpu_kern_sum``) and
nsys-ai's diff count it: overlapping kernels on two GPUs both count.

Fewer calls are not slower calls: per name, the count, the total, the time
per call (``*_per_call_us``: total / count) and the median instance
(``*_median_us``) are given before → after, and the change in total time is
split into ``count_ms`` (the change in count at the before-side's time per
call) and ``per_call_ms`` (the rest: the change in time per call at the
after-side's count); the two add up to ``delta_ms``. ``per_call_pct`` is the
change in time per call.

Every ``*_pct`` column is in percent (-11.6 is -11.6 %), in files and on
the terminal alike. With several captures per side, each side's count, total,
time per call and median instance are the medians over its captures (a name
a capture lacks counts 0 there), and ``per_call_low_pct``–``per_call_high_pct``
is the 95 % bootstrap interval of the per-call change, the captures' times
per call as the samples (:func:`traceattr.analysis.stats.compare_samples`);
``per_call_verdict`` says faster, slower, same (within ±1 %) or ambiguous.
With one capture a side there is no interval: calls inside one trace are not
repeated measurements of one thing.

Rows are sorted by impact: the absolute change in time, then in count.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from traceattr.analysis.stats import compare_samples
from traceattr.attribution.engine import Attribution
from traceattr.core.callnames import without_counters

DIFF_SCHEMA = {
    "level": pl.String, "name": pl.String,
    "before_n": pl.Int64, "after_n": pl.Int64, "delta_n": pl.Int64,
    "before_ms": pl.Float64, "after_ms": pl.Float64, "delta_ms": pl.Float64, "delta_pct": pl.Float64,
    "count_ms": pl.Float64, "per_call_ms": pl.Float64,
    "before_per_call_us": pl.Float64, "after_per_call_us": pl.Float64, "per_call_pct": pl.Float64,
    "per_call_low_pct": pl.Float64, "per_call_high_pct": pl.Float64, "per_call_verdict": pl.String,
    "before_median_us": pl.Float64, "after_median_us": pl.Float64,
}  # fmt: skip
LEVELS = ("total", "kernel", "role", "range")
TOTAL = "GPU kernel time"  # the headline: sum of kernel durations
TALLY_SCHEMA = {"level": pl.String, "name": pl.String, "n": pl.Int64, "ns": pl.Int64, "median_ns": pl.Float64}


def _ops(att: Attribution) -> pl.DataFrame:
    # one row per GPU op (nsys mode places an op once in ops_lazy; unique guards other placements)
    return att.ops_lazy().select("op_id", "kind", "role", "short_name", "name", "duration_ns").unique("op_id").collect()


def _stats(value: str) -> list[pl.Expr]:
    return [pl.len().alias("n"), pl.col(value).sum().alias("ns"), pl.col(value).median().alias("median_ns")]


def tally(att: Attribution) -> pl.DataFrame:
    """:data:`TALLY_SCHEMA`: ``level, name, n, ns, median_ns`` (per instance) of one trace: totals, kernels,
    roles, range names."""
    ops = _ops(att)
    kernels = ops.filter(pl.col("kind").cast(pl.String) == "kernel")
    dur = "duration_ns"
    totals = pl.concat([
        kernels.select(pl.lit(TOTAL).alias("name"), *_stats(dur)),
        ops.group_by(pl.format("{} time", pl.col("kind").cast(pl.String)).alias("name")).agg(*_stats(dur))
        .filter(pl.col("name") != "kernel time"),
        ops.select(pl.lit("all GPU ops").alias("name"), *_stats(dur)),
    ]).with_columns(pl.lit("total").alias("level"))  # fmt: skip
    per_kernel = kernels.group_by(pl.col("short_name").fill_null(pl.col("name")).alias("name")).agg(*_stats(dur))
    per_role = ops.group_by(pl.col("role").cast(pl.String).alias("name")).agg(*_stats(dur))
    ranges = att.ranges.filter(pl.col("range_id").is_not_null()).with_columns(pl.col("gpu_sum_ns").fill_null(0))
    per_range = ranges.group_by(without_counters(pl.col("name")).alias("name")).agg(*_stats("gpu_sum_ns"))
    parts = [per_kernel.with_columns(pl.lit("kernel").alias("level")), per_role.with_columns(pl.lit("role").alias("level")),
             per_range.with_columns(pl.lit("range").alias("level"))]  # fmt: skip
    return pl.concat([p.select(list(TALLY_SCHEMA)).cast(TALLY_SCHEMA) for p in (totals, *parts)])  # type: ignore[arg-type]


def _side(tallies: Sequence[pl.DataFrame]) -> pl.DataFrame:
    """One side's ``level, name, n, ns, per_call_ns, median_ns`` (medians over its captures; a capture that lacks
    a name counts 0 calls there) and ``per_call`` (each capture's time per call, for the interval)."""
    stacked = pl.concat([t.with_columns(pl.lit(i, pl.Int64).alias("capture")) for i, t in enumerate(tallies)])
    every = (
        stacked.select("level", "name")
        .unique()
        .join(pl.DataFrame({"capture": range(len(tallies))}, schema={"capture": pl.Int64}), how="cross")
    )
    full = every.join(stacked, on=["level", "name", "capture"], how="left").with_columns(
        pl.col("n").fill_null(0), pl.col("ns").fill_null(0)
    )
    per_call = pl.when(pl.col("n") > 0).then(pl.col("ns") / pl.col("n"))
    return full.group_by("level", "name").agg(
        pl.col("n").median().round().cast(pl.Int64),
        pl.col("ns").median(),
        per_call.median().alias("per_call_ns"),
        pl.col("median_ns").median(),
        per_call.drop_nulls().alias("per_call"),
    )


def diff(before: Attribution | Sequence[Attribution], after: Attribution | Sequence[Attribution]) -> pl.DataFrame:
    """:data:`DIFF_SCHEMA` rows: every total, kernel, role and range name of either side, by impact per level.
    Each side is one attribution or several captures of the same program."""
    sides = [[before] if isinstance(before, Attribution) else list(before),
             [after] if isinstance(after, Attribution) else list(after)]  # fmt: skip
    return diff_tallies([tally(a) for a in sides[0]], [tally(a) for a in sides[1]])


def diff_tallies(before: Sequence[pl.DataFrame], after: Sequence[pl.DataFrame]) -> pl.DataFrame:
    """:func:`diff` of the :func:`tally` frames of each side's captures (so a caller can drop each attribution
    once tallied)."""
    if not before or not after:
        raise ValueError("diff needs at least one capture on each side")
    joined = _side(before).join(_side(after), on=["level", "name"], how="full", coalesce=True, suffix="_after")
    n0, n1 = pl.col("n").fill_null(0), pl.col("n_after").fill_null(0)
    t0, t1 = pl.col("ns").fill_null(0) / 1e6, pl.col("ns_after").fill_null(0) / 1e6
    c0, c1 = pl.col("per_call_ns") / 1e3, pl.col("per_call_ns_after") / 1e3  # µs per call; null without one
    count_ms = (n1 - n0) * c0 / 1e3
    out = joined.select(
        "level", "name", n0.alias("before_n"), n1.alias("after_n"), (n1 - n0).alias("delta_n"),
        t0.alias("before_ms"), t1.alias("after_ms"), (t1 - t0).alias("delta_ms"),
        pl.when(t0 > 0).then(100 * (t1 - t0) / t0).otherwise(None).alias("delta_pct"),
        # Δt = Δn · per_call0 + n1 · Δper_call; with no call on one side, all of it is the count's
        pl.when(c0.is_not_null() & c1.is_not_null()).then(count_ms).otherwise(t1 - t0).alias("count_ms"),
        pl.when(c0.is_not_null() & c1.is_not_null()).then(t1 - t0 - count_ms).alias("per_call_ms"),
        c0.alias("before_per_call_us"), c1.alias("after_per_call_us"),
        pl.when(c0 > 0).then(100 * (c1 / c0 - 1)).alias("per_call_pct"),
        (pl.col("median_ns") / 1e3).alias("before_median_us"), (pl.col("median_ns_after") / 1e3).alias("after_median_us"),
        "per_call", "per_call_after",
    )  # fmt: skip
    out = _with_intervals(out, several=len(before) > 1 and len(after) > 1)
    order = pl.col("level").replace_strict({lvl: i for i, lvl in enumerate(LEVELS)}, return_dtype=pl.Int64)
    # totals in a fixed order (kernel time first, all GPU ops last); the rest by impact
    fixed = (
        pl.when(pl.col("level") != "total").then(0).when(pl.col("name") == TOTAL).then(0)
        .when(pl.col("name") == "all GPU ops").then(2).otherwise(1)
    )  # fmt: skip
    return (
        out.with_columns(
            order.alias("_l"),
            fixed.alias("_f"),
            pl.col("delta_ms").abs().alias("_t"),
            pl.col("delta_n").abs().alias("_n"),
        )
        .sort(["_l", "_f", "_t", "_n", "name"], descending=[False, False, True, True, False])
        .select(list(DIFF_SCHEMA))
        .cast(DIFF_SCHEMA)  # type: ignore[arg-type]
    )


def _with_intervals(out: pl.DataFrame, several: bool) -> pl.DataFrame:
    """The per-call interval and verdict, from the captures' times per call (only with two or more a side)."""
    low: list[float | None] = []
    high: list[float | None] = []
    verdict: list[str | None] = []
    for b, a in out.select("per_call", "per_call_after").iter_rows():
        if several and b is not None and a is not None and len(b) >= 2 and len(a) >= 2:
            c = compare_samples(np.asarray(b, dtype=float), np.asarray(a, dtype=float))
            finite = bool(np.isfinite(c.low) and np.isfinite(c.high))
            low.append(100 * (c.low - 1) if finite else None)
            high.append(100 * (c.high - 1) if finite else None)
            verdict.append(c.verdict)
        else:
            low.append(None)
            high.append(None)
            verdict.append(None)
    return out.with_columns(
        pl.Series("per_call_low_pct", low, pl.Float64),
        pl.Series("per_call_high_pct", high, pl.Float64),
        pl.Series("per_call_verdict", verdict, pl.String),
    )
