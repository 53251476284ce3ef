"""Many reports at once: one attribution per report, in parallel, then one result.

A TP8 run writes eight reports per configuration, a sweep campaign dozens.
Each report is attributed on its own (:func:`attribute_report`: a picklable
module-level function, so local processes, a Dask cluster and nsys's recipe
framework can all run it), and :func:`combine` concatenates what came back
with a ``report`` column. :func:`across_reports` then lines the reports up per
range name (or call series): per-report median, the median, max and spread of
those over reports, and which report (rank) is slowest.

A report that fails (damaged, foreign, missing) fails alone: its result
carries the one-line reason and the others finish. Ranges and per-report
summaries come back to the caller (small); per-op tables can be millions of
rows, so with a parts folder each worker writes its own to parquet and the
caller streams them into the final file. Workers and the caller must then
see the same file system, as they already must for the inputs.
"""

from __future__ import annotations

import contextlib
import glob
import os
import resource
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from traceattr.analysis.roofline import peak_bandwidth
from traceattr.attribution.engine import ROLE_COLUMNS, Attribution, Mode, RangeFilter, attribute
from traceattr.attribution.intervals import union_length
from traceattr.attribution.roles import ROLES, RoleRules
from traceattr.core.cpus import usable_cpus
from traceattr.core.errors import TraceattrError
from traceattr.core.output import FileFormat, write_table
from traceattr.core.runfolder import ACROSS_REPORTS, CALLS, KERNELS, RANGES, REPORTS
from traceattr.core.runfolder import TRACE as RUN_TRACE
from traceattr.trace.inputs import resolve_trace
from traceattr.trace.loader import load_trace

REPORT = "report"  # the column naming the report a row came from
_EXPORT_SUFFIXES = (".sqlite", ".db")
_REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
_GLOB_CHARS = frozenset("*?[")

REPORT_SCHEMA = {
    REPORT: pl.String, "path": pl.String, "ok": pl.Boolean, "error": pl.String,
    "nsys_version": pl.String, "gpu": pl.String, "peak_bytes_per_s": pl.Float64, "ranges": pl.Int64, "gpu_ops": pl.Int64, "kernels": pl.Int64,
    "unattributed_ops": pl.Int64, "gpu_start_ns": pl.Int64, "gpu_end_ns": pl.Int64, "gpu_span_ns": pl.Int64,
    "gpu_sum_ns": pl.Int64, "busy_ns": pl.Int64, **{c: pl.Int64 for c in ROLE_COLUMNS},
    "seconds": pl.Float64, "worker_pid": pl.Int64, "worker_peak_rss_mb": pl.Float64, "notes": pl.String,
}  # fmt: skip


@dataclass(frozen=True)
class Settings:
    """What to compute for every report (picklable: it travels to workers)."""

    mode: Mode = "nsys"
    domain: str | None = None
    match: str | None = None
    rules: str | None = None  # a user rules file, loaded by each worker
    engine: str = "auto"
    calls: bool = False  # also the per-call table (`compare`)
    group: str | None = None  # how call names read as backend + shape (traceattr.core.callnames)


@dataclass(frozen=True)
class ReportResult:
    """One report's answer, or its one-line failure."""

    index: int
    report: str
    path: str
    summary: dict[str, Any]  # one row of REPORT_SCHEMA
    ranges: pl.DataFrame | None = None
    calls: pl.DataFrame | None = None
    kernels_part: str | None = None  # parquet written by the worker
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Combined:
    """The reports' results side by side (each frame has the ``report`` column first)."""

    ranges: pl.DataFrame
    calls: pl.DataFrame | None
    reports: pl.DataFrame
    kernel_parts: tuple[str, ...]
    failures: tuple[str, ...] = field(default=())


# ---------------------------------------------------------------- inputs


def expand_inputs(args: Sequence[str | Path]) -> list[Path]:
    """The reports behind what the user named: files, folders and glob patterns.

    A folder is a `traceattr profile` run folder (it holds ``trace.sqlite``) or
    a folder of reports: its ``*.sqlite`` exports, its ``*.nsys-rep`` reports
    that have no export beside them, and its run folders. A pattern that
    matches nothing is an error; a path that does not exist is kept, to fail
    alone with its reason.
    """
    found: list[Path] = []
    for arg in args:
        p = Path(arg)
        if p.is_dir():
            found.extend([p] if (p / RUN_TRACE).is_file() else _reports_in(p))
        elif not p.exists() and _GLOB_CHARS & set(str(arg)):
            hits = sorted(glob.glob(str(arg)))
            if not hits:
                raise TraceattrError(f"{arg}: no file matches this pattern")
            found.extend(expand_inputs(hits))
        else:
            found.append(p)
    seen: set[Path] = set()
    unique = []
    for p in found:  # the same report named twice (a folder and a pattern) runs once
        try:
            key = p.resolve()
        except (OSError, RuntimeError):  # a symlink loop: kept, to fail alone with its reason
            key = p.absolute()
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


def _reports_in(folder: Path) -> list[Path]:
    children = sorted(folder.iterdir())
    exports = [c for c in children if c.suffix in _EXPORT_SUFFIXES and c.is_file() and ".partial" not in c.name]
    stems = {c.stem for c in exports}
    reports = [c for c in children if c.suffix in _REPORT_SUFFIXES and c.is_file() and c.stem not in stems]
    runs = [c for c in children if c.is_dir() and (c / RUN_TRACE).is_file()]
    hits = sorted([*exports, *reports, *runs])
    if not hits:
        raise TraceattrError(
            f"{folder}: is a directory without nsys exports (.sqlite), reports (.nsys-rep) or run folders"
        )
    return hits


def report_names(paths: Sequence[str | Path]) -> list[str]:
    """A short unique name per report: the file's stem (a run folder's name), else its path below the common folder."""
    ps = [Path(p) for p in paths]

    def stem(p: Path) -> str:
        if p.name == RUN_TRACE or p.is_dir():
            return (p.parent if p.name == RUN_TRACE else p).name
        return p.stem

    names = [stem(p) for p in ps]
    if len(set(names)) == len(names):
        return names
    absolute = [p.resolve() for p in ps]
    root = Path(os.path.commonpath([str(a.parent) for a in absolute]))
    return [str(a.relative_to(root).with_suffix("")) for a in absolute]


# ---------------------------------------------------------------- one report


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


def attribute_report(path: str, report: str, index: int, *, settings: Settings, parts: str | None) -> ReportResult:
    """Attribute one report; never raises for a bad report (the reason is in the result).

    With *parts* (a folder) the per-op table is written there as parquet, for
    :func:`write_combined` to stream into the final file.
    """
    started = time.perf_counter()
    summary: dict[str, Any] = {REPORT: report, "path": str(path), "ok": False}
    try:
        att = attribute(
            load_trace(resolve_trace(path), settings.engine),
            mode=settings.mode,
            rules=RoleRules.load(settings.rules),
            select=RangeFilter(settings.domain, settings.match),
        )
        tag = pl.lit(report).alias(REPORT)
        ranges = att.ranges.select(tag, pl.all())
        table = None
        if settings.calls:
            from traceattr.analysis.calls import calls

            table = calls(att, settings.group).select(tag, pl.all())
        part = None
        if parts is not None:
            ops = att.ops_lazy().select(tag, pl.all()).sort("op_id")  # joins may reorder; the output must not vary
            part = str(write_table(ops, Path(parts), f"{KERNELS}-{index:06d}", "parquet"))
        summary.update(_report_summary(att), ok=True)
        result = ReportResult(index, report, str(path), summary, ranges, table, part)
    except TraceattrError as err:
        result = ReportResult(index, report, str(path), summary, error=str(err))
    except (OSError, pl.exceptions.PolarsError, ValueError) as err:  # damage nothing above recognised
        first = (str(err).splitlines() or [""])[0]
        result = ReportResult(index, report, str(path), summary, error=f"{path}: {type(err).__name__}: {first}")
    summary["error"] = result.error
    summary["seconds"] = round(time.perf_counter() - started, 4)
    summary["worker_pid"] = os.getpid()
    summary["worker_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux
    return result


def _report_summary(att: Attribution) -> dict[str, Any]:
    """Per report (rank): what ran on the GPU, once per op, and where it went."""
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


# ---------------------------------------------------------------- running many


Task = Callable[[int], ReportResult]


def run_reports(
    paths: Sequence[str | Path],
    settings: Settings,
    *,
    workers: int | None = None,
    dask: str | None = None,
    parts: str | Path | None = None,
    on_done: Callable[[ReportResult], None] | None = None,
) -> list[ReportResult]:
    """Attribute every report in *paths*; results in input order.

    Local processes by default (*workers*, default: one per core; 1 runs in
    this process), or on the Dask scheduler at *dask* (``"local"`` starts a
    local cluster of *workers* processes). *on_done* sees each result as it
    arrives (a progress bar).
    """
    names = report_names(paths)
    jobs = [(str(p), n, i) for i, (p, n) in enumerate(zip(paths, names, strict=True))]
    part_dir = None if parts is None else str(parts)
    workers = max(1, workers or usable_cpus())
    done = on_done or (lambda _r: None)
    if dask is not None:
        results = list(_on_dask(jobs, settings, part_dir, dask, workers, done))
    elif workers == 1 or len(jobs) == 1:
        results = []
        for path, name, i in jobs:
            results.append(attribute_report(path, name, i, settings=settings, parts=part_dir))
            done(results[-1])
    else:
        results = list(_in_processes(jobs, settings, part_dir, min(workers, len(jobs)), done))
    return sorted(results, key=lambda r: r.index)


@contextlib.contextmanager
def _worker_threads(workers: int) -> Iterator[dict[str, str]]:
    """POLARS_MAX_THREADS for worker processes (they read it at import), so N workers share the cores instead of each taking all."""
    env = {"POLARS_MAX_THREADS": str(max(1, usable_cpus() // workers))}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _failed(job: tuple[str, str, int], reason: str) -> ReportResult:
    path, name, i = job
    summary = {REPORT: name, "path": path, "ok": False, "error": reason}
    return ReportResult(i, name, path, summary, error=reason)


def _in_processes(jobs, settings, parts, workers, done) -> Iterator[ReportResult]:  # type: ignore[no-untyped-def]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    # spawn, not fork: a forked child inherits polars' thread pool in whatever state it was
    with (
        _worker_threads(workers),
        ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool,
    ):
        futures = {pool.submit(attribute_report, *job, settings=settings, parts=parts): job for job in jobs}
        try:
            for fut in as_completed(futures):
                try:
                    result = fut.result()
                except BrokenProcessPool:  # a worker died (out of memory, a signal): the reports it held fail
                    result = _failed(futures[fut], f"{futures[fut][0]}: the worker process died while reading it")
                done(result)
                yield result
        except BaseException:  # Ctrl-C or an error here: stop now rather than finish every queued report
            procs = list((getattr(pool, "_processes", None) or {}).values())  # no public way before Python 3.14
            pool.shutdown(wait=False, cancel_futures=True)
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.join(timeout=10)  # gone before the caller removes the parts they were writing
            raise


def _on_dask(jobs, settings, parts, address, workers, done) -> Iterator[ReportResult]:  # type: ignore[no-untyped-def]
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise TraceattrError("--dask needs Dask's distributed scheduler: pip install 'traceattr[multi]'") from None
    cluster = None
    try:
        if address == "local":
            with _worker_threads(workers) as env:
                cluster = LocalCluster(
                    n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None, env=env
                )
            client = Client(cluster)
        else:
            try:
                client = Client(address, timeout="10s")
            except (OSError, TimeoutError) as err:
                raise TraceattrError(f"--dask {address}: cannot reach the scheduler ({err})") from None
        with client:
            futures = client.map(
                attribute_report,
                *zip(*jobs, strict=True),
                settings=settings,
                parts=parts,
                pure=False,
            )
            job_of = {f.key: job for f, job in zip(futures, jobs, strict=True)}
            for fut in as_completed(futures):
                try:
                    result = fut.result()
                except Exception as err:  # a worker lost with the task (KilledWorker) fails that report only
                    result = _failed(job_of[fut.key], f"{job_of[fut.key][0]}: Dask worker failed: {type(err).__name__}")
                done(result)
                yield result
    finally:
        if cluster is not None:
            cluster.close()


# ---------------------------------------------------------------- reducing


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
    """*calls* pooled over reports, with one round per (report, iteration): iteration 3 of two
    reports are two rounds, so round wins and direction checks never pair calls across reports."""
    if calls.height == 0 or calls["iter"].is_null().all():
        return calls
    rounds = pl.struct(REPORT, "iter").rank("dense").cast(pl.Int64)
    return calls.with_columns(pl.when(pl.col("iter").is_not_null()).then(rounds).alias("iter"))


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
