"""One row per measured call: which backend, shape, arm and iteration, and its GPU time.

A call is a range that launched GPU work. Ranges traceattr's runner writes
(domain ``traceattr``, ``backend=… shape=… arm=… iter=…``) are parsed exactly;
in any other trace a call is a top-level range with GPU work, its *series*
the name without a trailing iteration number (``probe:fa2_h16_q1_ctx131072:3``
→ series ``probe:fa2_h16_q1_ctx131072``, iteration 3), and its backend and
shape read from the series when it looks like ``<backend>_<shape>``.
"""

from __future__ import annotations

import polars as pl

from traceattr.attribution.engine import ROLE_COLUMNS, Attribution
from traceattr.callnames import DOMAIN, FLUSH, WARMUP
from traceattr.shapes import ShapeError, parse_shape

CALL_COLUMNS = (
    "call_id", "name", "series", "backend", "shape", "arm", "iter",
    "gpu_start_ns", "gpu_span_ns", "busy_ns", "gap_ns", "kernel_sum_ns", "gpu_sum_ns", "launch_latency_ns",
    "kernels", "gpu_ops", *ROLE_COLUMNS,
)  # fmt: skip


def calls(att: Attribution) -> pl.DataFrame:
    """Measured calls of *att* (see module doc), in time order."""
    ranges = att.ranges.filter(pl.col("range_id").is_not_null() & (pl.col("gpu_ops") > 0))
    # traceattr's own calls; the domain name can be missing from an export (no DomainCreate row)
    ours = ranges.filter(
        pl.col("domain").eq(DOMAIN).fill_null(True)
        & pl.col("message").str.contains(r"^backend=\S+ shape=\S+ arm=\S+ iter=\d+$")
    )
    if ours.height:
        picked = ours.with_columns(
            pl.col("message").str.extract(r"backend=(\S+)").alias("backend"),
            pl.col("message").str.extract(r"shape=(\S+)").alias("shape"),
            pl.col("message").str.extract(r"arm=(\S+)").alias("arm"),
            pl.col("message").str.extract(r"iter=(\d+)").cast(pl.Int64).alias("iter"),
        ).with_columns(pl.format("{} {}", "backend", "shape").alias("series"))
    else:
        skip = pl.col("message").is_in([FLUSH]) | pl.col("message").str.starts_with(WARMUP)
        top = ranges.filter((pl.col("level") == 0) & ~skip.fill_null(False))
        parts = pl.col("name").str.extract_groups(r"^(?P<series>.*?)[:#_ -]?(?P<iter>\d+)$")
        picked = top.with_columns(parts.struct.field("series"), parts.struct.field("iter").cast(pl.Int64))
        picked = picked.with_columns(pl.col("series").fill_null(pl.col("name")), pl.lit(None, pl.String).alias("arm"))
        picked = picked.join(_series_labels(picked["series"].unique()), on="series", how="left")
    return picked.select(pl.col("range_id").alias("call_id"), *CALL_COLUMNS[1:]).sort("gpu_start_ns")


def _series_labels(series: pl.Series) -> pl.DataFrame:
    """backend and canonical shape for series that read ``[domain:]<backend>_<shape>``."""
    rows = []
    for s in series.drop_nulls().to_list():
        body = s.split(":", 1)[-1]
        backend, _, rest = body.partition("_")
        try:
            shape = parse_shape(rest).short_name if rest else None
        except ShapeError:
            shape = None
        rows.append((s, backend if shape else s, shape))
    return pl.DataFrame(rows, schema={"series": pl.String, "backend": pl.String, "shape": pl.String}, orient="row")
