"""The reports' results side by side: concatenated with a ``report`` column, lined up per range name
(or call series) across reports, and written (per-op parts streamed into the final file)."""

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
from traceattr.core.runfolder import ACROSS_REPORTS, CALLS, KERNELS, RANGES, REPORTS, TRACE
from traceattr.jobs.many_report import REPORT, REPORT_SCHEMA, ReportResult


@dataclass(frozen=True)
class Combined:
    """The reports' results side by side (each frame has the ``report`` column first)."""

    ranges: pl.DataFrame
    calls: pl.DataFrame | None
    reports: pl.DataFrame
    kernel_parts: tuple[str, ...]
    failures: tuple[str, ...] = field(default=())


def combine(results: Sequence[ReportResult]) -> Combined:
    """Concatenate the reports' tables (``report`` column first) and their one-row summaries."""
    ok = [r for r in results if r.ok]
    ranges = pl.concat([r.ranges for r in ok if r.ranges is not None], how="diagonal_relaxed") if ok else pl.DataFrame()
    calls = [r.calls for r in ok if r.calls is not None]
    reports = pl.DataFrame([{k: r.summary.get(k) for k in REPORT_SCHEMA} for r in results], schema=REPORT_SCHEMA)
    return Combined(
        ranges=ranges,
        calls=pl.concat(calls, how="diagonal_relaxed") if calls else None,
        reports=reports,
        kernel_parts=tuple(r.kernels_part for r in ok if r.kernels_part),
        failures=tuple(r.error for r in results if r.error),
    )


def across_reports(frame: pl.DataFrame, key: str, value: str = "gpu_span_ns") -> pl.DataFrame:
    """Per *key* (range name, call series): how the reports (ranks) compare.

    Per report the median of *value* over that key's rows; then over reports
    the median, min and max of those medians, the spread (max − min, and
    max / min − 1), and the slowest and fastest report. For tensor- or
    context-parallel ranks the slowest rank sets the step time.
    """
    per = (
        frame.filter(pl.col(value).is_not_null())
        .group_by(key, REPORT)
        .agg(pl.len().alias("n"), pl.col(value).median().alias("med"), pl.col(value).sum().alias("total"))
    )
    slowest = per.sort("med", REPORT, descending=[True, False]).group_by(key, maintain_order=True).first()
    fastest = per.sort("med", REPORT).group_by(key, maintain_order=True).first()
    stat = value.removesuffix("_ns")
    out = per.group_by(key).agg(
        pl.col(REPORT).n_unique().alias("reports"),
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
        .join(slowest.select(key, pl.col(REPORT).alias("slowest_report")), on=key, how="left")
        .join(fastest.select(key, pl.col(REPORT).alias("fastest_report")), on=key, how="left")
        .sort(f"{stat}_total_ns", key, descending=[True, False])
    )


def rounds_per_report(calls: pl.DataFrame) -> pl.DataFrame:
    """*calls* pooled over reports, with one iteration per (report, iteration): iteration 3 of two
    reports are two iterations, so iteration wins and direction checks never pair calls across reports."""
    if calls.height == 0 or calls["iter"].is_null().all():
        return calls
    rounds = pl.struct(REPORT, "iter").rank("dense").cast(pl.Int64)
    return calls.with_columns(pl.when(pl.col("iter").is_not_null()).then(rounds).alias("iter"))


def pooled_compute_peak(reports: pl.DataFrame) -> tuple[ComputePeak | None, list[str]]:
    """The dense peaks the pooled roofline uses: the reports' GPU when they all ran on one kind (each
    report's own peak then); none, with a note saying why, when they ran on several."""
    gpus = reports.filter(pl.col("ok"))["gpu"].drop_nulls().unique().sort().to_list()
    if len(gpus) > 1:
        return None, [f"roofline and bound left empty: the reports ran on {len(gpus)} kinds of GPU ({', '.join(gpus)})"]
    return (compute_peak(gpus[0]) if gpus else None), []


def report_events(reports: pl.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Each report's CUDA-event times from its run folder's runner.json (reports without one: none)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for report, path in reports.select(REPORT, "path").iter_rows():
        folder = Path(path)
        folder = folder.parent if folder.name == TRACE else folder
        events = runner_events(folder) if folder.is_dir() else None
        if events:
            found[report] = events
    return found


def pooled_events(calls: pl.DataFrame, events: Mapping[str, Sequence[dict[str, Any]]]) -> list[dict[str, Any]] | None:
    """The reports' events keyed as :func:`rounds_per_report` keys their calls (iteration 3 of report b is
    the round it numbers), so each event meets its own report's call; None when no report has events."""
    if not events or calls.height == 0 or calls["iter"].is_null().all():
        return None
    rounds = (
        calls.select(REPORT, "iter", pl.struct(REPORT, "iter").rank("dense").cast(pl.Int64).alias("_round"))
        .filter(pl.col("iter").is_not_null())
        .unique()
    )
    tagged = pl.concat(
        [
            pl.DataFrame(list(evs))
            .select("backend", "shape", pl.col("iter").cast(pl.Int64), pl.col("event_us").cast(pl.Float64))
            .with_columns(pl.lit(report).alias(REPORT))
            for report, evs in events.items()
        ]
    )
    joined = tagged.join(rounds, on=[REPORT, "iter"], how="inner")
    return joined.select("backend", "shape", pl.col("_round").alias("iter"), "event_us").to_dicts()


def kernels_lazy(combined: Combined) -> pl.LazyFrame | None:
    """The reports' per-op tables as one lazy frame, in report order (streamed from the parts)."""
    if not combined.kernel_parts:
        return None
    return pl.concat([pl.scan_parquet(p) for p in combined.kernel_parts], how="diagonal_relaxed")


def write_combined(combined: Combined, out: Path, fmt: FileFormat, *, key: str = "name") -> list[Path]:
    """ranges, kernels, reports and across_reports tables in *out* (calls too when present)."""
    written = [write_table(combined.ranges, out, RANGES, fmt)]
    kernels = kernels_lazy(combined)
    if kernels is not None:
        written.append(write_table(kernels, out, KERNELS, fmt))
    if combined.calls is not None:
        written.append(write_table(combined.calls, out, CALLS, fmt))
    written.append(write_table(combined.reports, out, REPORTS, fmt))
    source = combined.calls if combined.calls is not None else combined.ranges
    if source.height:
        written.append(write_table(across_reports(source, key), out, ACROSS_REPORTS, fmt))
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
