"""The traces' results side by side: concatenated with a ``trace`` column, lined up per range name
(or call series) across traces, and written (per-op parts streamed into the final file)."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from traceattr.analysis.roofline import ComputePeak, compute_peak
from traceattr.core.output import FileFormat, write_table
from traceattr.core.records import runner_events
from traceattr.core.runfolder import ACROSS_TRACES, CALLS, KERNELS, RANGES, TRACE, TRACES
from traceattr.jobs.many_trace import TRACE_COLUMN, TRACE_SCHEMA, TraceResult


@dataclass(frozen=True)
class Combined:
    """The traces' results side by side (each frame has the ``trace`` column first)."""

    ranges: pl.DataFrame
    calls: pl.DataFrame | None
    traces: pl.DataFrame
    kernel_parts: tuple[str, ...]
    failures: tuple[str, ...] = field(default=())


def combine(results: Sequence[TraceResult]) -> Combined:
    """Concatenate the traces' tables (``trace`` column first) and their one-row summaries."""
    ok = [r for r in results if r.ok]
    ranges = pl.concat([r.ranges for r in ok if r.ranges is not None], how="diagonal_relaxed") if ok else pl.DataFrame()
    calls = [r.calls for r in ok if r.calls is not None]
    traces = pl.DataFrame([{k: r.summary.get(k) for k in TRACE_SCHEMA} for r in results], schema=TRACE_SCHEMA)
    return Combined(
        ranges=ranges,
        calls=pl.concat(calls, how="diagonal_relaxed") if calls else None,
        traces=traces,
        kernel_parts=tuple(r.kernels_part for r in ok if r.kernels_part),
        failures=tuple(r.error for r in results if r.error),
    )


def across_traces(frame: pl.DataFrame, key: str, value: str = "gpu_span_ns") -> pl.DataFrame:
    """Per *key* (range name, call series): how the traces (ranks) compare.

    Per trace the median of *value* over that key's rows; then over traces
    the median, min and max of those medians, the spread (max − min, and
    max / min − 1), and the slowest and fastest trace. For tensor- or
    context-parallel ranks the slowest rank sets the step time.
    """
    per = (
        frame.filter(pl.col(value).is_not_null())
        .group_by(key, TRACE_COLUMN)
        .agg(pl.len().alias("n"), pl.col(value).median().alias("med"), pl.col(value).sum().alias("total"))
    )
    slowest = per.sort("med", TRACE_COLUMN, descending=[True, False]).group_by(key, maintain_order=True).first()
    fastest = per.sort("med", TRACE_COLUMN).group_by(key, maintain_order=True).first()
    stat = value.removesuffix("_ns")
    out = per.group_by(key).agg(
        pl.col(TRACE_COLUMN).n_unique().alias("traces"),
        pl.col("n").sum().alias("rows"),
        pl.col("total").sum().alias(f"{stat}_total_ns"),
        pl.col("med").median().alias(f"rank_median_{stat}_ns"),
        pl.col("med").min().alias(f"rank_min_{stat}_ns"),
        pl.col("med").max().alias(f"rank_max_{stat}_ns"),
    )
    spread = pl.col(f"rank_max_{stat}_ns") - pl.col(f"rank_min_{stat}_ns")
    return (
        out.with_columns(
            spread.alias(f"spread_{stat}_ns"),
            (spread / pl.col(f"rank_min_{stat}_ns")).alias("spread_rel"),
        )
        .join(slowest.select(key, pl.col(TRACE_COLUMN).alias("slowest_trace")), on=key, how="left")
        .join(fastest.select(key, pl.col(TRACE_COLUMN).alias("fastest_trace")), on=key, how="left")
        .sort(f"{stat}_total_ns", key, descending=[True, False])
    )


def _pooled_iteration() -> pl.Expr:
    """The pooled number of each (trace, iteration): what :func:`iterations_per_trace` gives a call and
    :func:`pooled_events` its event, so the two meet."""
    return pl.struct(TRACE_COLUMN, "iter").rank("dense").cast(pl.Int64)


def iterations_per_trace(calls: pl.DataFrame) -> pl.DataFrame:
    """*calls* pooled over traces, with one iteration per (trace, iteration): iteration 3 of two
    traces are two iterations, so iteration wins and direction checks never pair calls across traces."""
    if calls.height == 0 or calls["iter"].is_null().all():
        return calls
    return calls.with_columns(pl.when(pl.col("iter").is_not_null()).then(_pooled_iteration()).alias("iter"))


def pooled_compute_peak(traces: pl.DataFrame) -> tuple[ComputePeak | None, list[str]]:
    """The dense peaks the pooled roofline uses: the traces' GPU when they all ran on one kind (each
    trace's own peak then); none, with a note saying why, when they ran on several."""
    gpus = traces.filter(pl.col("ok"))["gpu"].drop_nulls().unique().sort().to_list()
    if len(gpus) > 1:
        return None, [f"roofline and bound left empty: the traces ran on {len(gpus)} kinds of GPU ({', '.join(gpus)})"]
    return (compute_peak(gpus[0]) if gpus else None), []


def trace_events(traces: pl.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Each trace's CUDA-event times from its run folder's runner.json (traces without one: none)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for trace, path in traces.select(TRACE_COLUMN, "path").iter_rows():
        folder = Path(path)
        folder = folder.parent if folder.name == TRACE else folder
        events = runner_events(folder) if folder.is_dir() else None
        if events:
            found[trace] = events
    return found


def pooled_events(calls: pl.DataFrame, events: Mapping[str, Sequence[dict[str, Any]]]) -> list[dict[str, Any]] | None:
    """The traces' events keyed as :func:`iterations_per_trace` keys their calls (iteration 3 of trace b is
    the pooled iteration it numbers), so each event meets its own trace's call; None when no trace has events."""
    if not events or calls.height == 0 or calls["iter"].is_null().all():
        return None
    pooled = (
        calls.select(TRACE_COLUMN, "iter", _pooled_iteration().alias("_pooled"))
        .filter(pl.col("iter").is_not_null())
        .unique()
    )
    tagged = pl.concat(
        [
            pl.DataFrame(list(evs))
            .select("backend", "shape", pl.col("iter").cast(pl.Int64), pl.col("event_us").cast(pl.Float64))
            .with_columns(pl.lit(trace).alias(TRACE_COLUMN))
            for trace, evs in events.items()
        ]
    )
    joined = tagged.join(pooled, on=[TRACE_COLUMN, "iter"], how="inner")
    return joined.select("backend", "shape", pl.col("_pooled").alias("iter"), "event_us").to_dicts()


def kernels_lazy(combined: Combined) -> pl.LazyFrame | None:
    """The traces' per-op tables as one lazy frame, in trace order (streamed from the parts)."""
    if not combined.kernel_parts:
        return None
    return pl.concat([pl.scan_parquet(p) for p in combined.kernel_parts], how="diagonal_relaxed")


def write_combined(combined: Combined, out: Path, fmt: FileFormat, *, key: str = "name") -> list[Path]:
    """ranges, kernels, traces and across_traces tables in *out* (calls too when present)."""
    written = [write_table(combined.ranges, out, RANGES, fmt)]
    kernels = kernels_lazy(combined)
    if kernels is not None:
        written.append(write_table(kernels, out, KERNELS, fmt))
    if combined.calls is not None:
        written.append(write_table(combined.calls, out, CALLS, fmt))
    written.append(write_table(combined.traces, out, TRACES, fmt))
    source = combined.calls if combined.calls is not None else combined.ranges
    if source.height:
        written.append(write_table(across_traces(source, key), out, ACROSS_TRACES, fmt))
    return written


@contextlib.contextmanager
def parts_folder(out: Path) -> Iterator[Path]:
    """A hidden scratch folder inside *out* for the workers' per-op parts; removed afterwards
    (and *out* too when this made it and nothing was written into it)."""
    import shutil

    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=".traceattr-parts-", dir=out))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if made:
            with contextlib.suppress(OSError):
                out.rmdir()  # only when empty
