"""One trace of many: what to compute (:class:`Settings`), the work itself (:func:`attribute_trace`) and its answer.

attribute_trace is a picklable module-level function, so local processes, a Dask cluster and nsys's
recipe framework can all run it. A trace that fails (damaged, foreign, missing) fails alone: its
result carries the one-line reason.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from traceattr.analysis.roofline import peak_bandwidth
from traceattr.attribution.engine import ROLE_COLUMNS, Attribution, Mode, RangeFilter, attribute
from traceattr.attribution.intervals import union_length
from traceattr.attribution.roles import ROLES, RoleRules
from traceattr.core.encoding import table_text
from traceattr.core.errors import TraceattrError
from traceattr.core.output import write_table
from traceattr.core.runfolder import KERNELS
from traceattr.trace.inputs import resolve_trace
from traceattr.trace.loader import load_trace

TRACE_COLUMN = "trace"  # the column naming the trace a row came from

TRACE_SCHEMA = {
    TRACE_COLUMN: pl.String, "path": pl.String, "ok": pl.Boolean, "error": pl.String,
    "nsys_version": pl.String, "gpu": pl.String, "peak_bytes_per_s": pl.Float64, "ranges": pl.Int64, "gpu_ops": pl.Int64, "kernels": pl.Int64,
    "unattributed_ops": pl.Int64, "gpu_start_ns": pl.Int64, "gpu_end_ns": pl.Int64, "gpu_span_ns": pl.Int64,
    "gpu_sum_ns": pl.Int64, "busy_ns": pl.Int64, **{c: pl.Int64 for c in ROLE_COLUMNS},
    "seconds": pl.Float64, "worker_pid": pl.Int64, "worker_peak_rss_mb": pl.Float64, "notes": pl.String,
}  # fmt: skip


@dataclass(frozen=True)
class Settings:
    """What to compute for every trace (picklable: it travels to workers)."""

    mode: Mode = "nsys"
    domain: str | None = None
    match: str | None = None
    rules: str | None = None  # a user rules file, loaded by each worker
    engine: str = "auto"
    calls: bool = False  # also the per-call table (`compare`)
    group: str | None = None  # how call names read as backend + shape (traceattr.core.callnames)


@dataclass(frozen=True)
class TraceResult:
    """One trace's answer, or its one-line failure."""

    index: int
    trace: str
    path: str
    summary: dict[str, Any]  # one row of TRACE_SCHEMA
    ranges: pl.DataFrame | None = None
    calls: pl.DataFrame | None = None
    kernels_part: str | None = None  # parquet written by the worker
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def check_settings(settings: Settings) -> str | None:
    """Why *settings* cannot work (a bad rules file or regex), or None."""
    try:
        RoleRules.load(settings.rules)
        if settings.match is not None:
            pl.Series([""]).str.contains(settings.match)
    except TraceattrError as err:
        return str(err)
    except pl.exceptions.PolarsError as err:
        return f"--match: invalid regular expression {settings.match!r} ({str(err).splitlines()[0]})"
    return None


def attribute_trace(path: str, trace: str, index: int, *, settings: Settings, parts: str | None) -> TraceResult:
    """Attribute one trace; never raises for a bad trace (the reason is in the result).

    With *parts* (a folder) the per-op table is written there as parquet, for
    :func:`write_combined` to stream into the final file.
    """
    started = time.perf_counter()
    trace = table_text(trace)  # a column of every table: names whose bytes are not UTF-8 shown as \xNN
    summary: dict[str, Any] = {TRACE_COLUMN: trace, "path": table_text(str(path)), "ok": False}
    try:
        att = attribute(
            load_trace(resolve_trace(path), settings.engine),
            mode=settings.mode,
            rules=RoleRules.load(settings.rules),
            select=RangeFilter(settings.domain, settings.match),
        )
        tag = pl.lit(trace).alias(TRACE_COLUMN)
        ranges = att.ranges.select(tag, pl.all())
        table = None
        if settings.calls:
            from traceattr.analysis.calls import calls

            table = calls(att, settings.group).select(tag, pl.all())
        part = None
        if parts is not None:
            ops = att.ops_lazy().select(tag, pl.all()).sort("op_id")  # joins may reorder; the output must not vary
            part = str(write_table(ops, Path(parts), f"{KERNELS}-{index:06d}", "parquet"))
        summary.update(_trace_summary(att), ok=True)
        result = TraceResult(index, trace, str(path), summary, ranges, table, part)
    except TraceattrError as err:
        result = TraceResult(index, trace, str(path), summary, error=table_text(str(err)))
    except (OSError, pl.exceptions.PolarsError, ValueError) as err:  # damage nothing above recognised
        first = (str(err).splitlines() or [""])[0]
        error = table_text(f"{path}: {type(err).__name__}: {first}")
        result = TraceResult(index, trace, str(path), summary, error=error)
    summary["error"] = result.error
    summary["seconds"] = round(time.perf_counter() - started, 4)
    summary["worker_pid"] = os.getpid()
    summary["worker_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux
    return result


def _trace_summary(att: Attribution) -> dict[str, Any]:
    """Per trace (rank): what ran on the GPU, once per op, and where it went."""
    ops = (
        att.trace.gpu_ops.select("op_id", "kind", "start", "end")
        .join(att.placement.select("op_id", "role", "range_id", "api_start_ns"), on="op_id", how="left")
        .with_columns((pl.col("end") - pl.col("start")).alias("dur"), pl.lit(0, pl.Int64).alias("_all"))
    )
    row = ops.select(
        pl.len().alias("gpu_ops"),
        (pl.col("kind") == "kernel").sum().alias("kernels"),
        (pl.col("range_id").is_null() & pl.col("api_start_ns").is_not_null()).sum().alias("unattributed_ops"),
        pl.col("start").min().alias("gpu_start_ns"),
        pl.col("end").max().alias("gpu_end_ns"),
        (pl.col("end").max() - pl.col("start").min()).alias("gpu_span_ns"),
        pl.col("dur").sum().alias("gpu_sum_ns"),
        *[pl.col("dur").filter(pl.col("role") == r).sum().alias(c) for r, c in zip(ROLES, ROLE_COLUMNS, strict=True)],
    ).row(0, named=True)
    busy = union_length(ops.select("_all", "start", "end"), "_all")["busy_ns"]
    devices = att.trace.devices
    return {
        **{k: (int(v) if v is not None else None) for k, v in row.items()},
        "busy_ns": int(busy[0]) if busy.len() else 0,
        "ranges": att.ranges.filter(pl.col("range_id").is_not_null()).height,
        "nsys_version": att.meta.nsys_version,
        "gpu": devices["name"][0] if devices.height and "name" in devices.columns else None,
        "peak_bytes_per_s": peak_bandwidth(devices)[0],
        "notes": "; ".join(att.notes) or None,
    }
