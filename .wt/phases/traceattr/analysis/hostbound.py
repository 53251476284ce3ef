"""Calls that waited for their own launches: host-bound, counted per arm (and per capture), not averaged in.

A call whose first op had **no queue wait** (the stream was free when its
first launch call was made: the GPU was ahead of the host) and that has
**idle gaps between its own ops** (``gap_ns``: no op of the call running)
spent part of its span waiting for the host to launch its next kernel. Its
time measures the host, not the kernels: on the H200 an eager
``fa3[splits=4]`` call held this way had 52–108 µs of gaps in a 71–127 µs
span, where the same call with its group enqueued ahead (``runner.hold``)
had 1.2–3.8 µs. A gap counts when it is more than ``gap_share`` of the
span, so the few µs between two kernels that were both queued do not.

Input: the calls table (:mod:`traceattr.analysis.calls`: ``queue_wait_ns``,
``gap_ns``, ``gpu_span_ns`` and the grouping columns), one capture or many
with a column telling them apart (pass it in *by*). Pure polars.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

GAP_SHARE = 0.10  # a call's idle gaps above this share of its span: it waited for a launch, not for a kernel
HOST_SHARE = 0.05  # host-bound calls above this share of an arm's calls in a capture: the host set the row's time

HOSTBOUND_SCHEMA: dict[str, pl.DataType] = {
    "calls": pl.UInt32(),
    "host_bound": pl.UInt32(),
    "share": pl.Float64(),
    "gap_us_median": pl.Float64(),  # median idle gap of the host-bound calls (null when none)
}


def host_bound(gap_share: float = GAP_SHARE) -> pl.Expr:
    """Per call: no queue wait before its first op and idle gaps above *gap_share* of its span."""
    return (pl.col("queue_wait_ns").fill_null(0) <= 0) & (
        pl.col("gap_ns").fill_null(0) > gap_share * pl.col("gpu_span_ns")
    )


def host_bound_calls(
    calls: pl.DataFrame, by: Sequence[str] = ("backend", "shape"), gap_share: float = GAP_SHARE
) -> pl.DataFrame:
    """Per group of *by*: ``calls``, ``host_bound`` (how many), ``share`` and ``gap_us_median``, sorted by *by*."""
    keys = list(by)
    flagged = calls.with_columns(host_bound(gap_share).alias("_hb"))
    return (
        flagged.group_by(keys)
        .agg(
            pl.len().cast(pl.UInt32).alias("calls"),
            pl.col("_hb").sum().cast(pl.UInt32).alias("host_bound"),
            (pl.col("gap_ns").filter(pl.col("_hb")).median() / 1e3).alias("gap_us_median"),
        )
        .with_columns((pl.col("host_bound") / pl.col("calls")).alias("share"))
        .select(*keys, *HOSTBOUND_SCHEMA)
        .cast({k: v for k, v in HOSTBOUND_SCHEMA.items()})
        .sort(keys)
    )
