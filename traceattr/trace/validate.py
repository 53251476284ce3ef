"""Values no nsys export can hold, caught after loading: a refusal or a note, never a silent wrong number.

A well-formed SQLite file can still hold a kernel that ends before it
starts, a start that is NULL, timestamps 292 years apart, one correlationId
shared by every launch, or a StringIds id given twice. Each would flow into
the attribution as negative durations, halved times or one range owning the
whole GPU. Each check is a few vectorised reductions over the loaded frames
(no per-row Python), so it costs little next to the read.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from traceattr.core.errors import TraceError
from traceattr.trace import schema as S
from traceattr.trace.typed import int_of

# Beyond this, interval arithmetic (end + 1, differences, sums) can overflow Int64: nsys's
# nanosecond clocks span a capture, hours, not 146 years.
MAX_TIMESTAMP = 1 << 62

# Memory bandwidths a GPU can have, bytes/s (nsys's TARGET_INFO_GPU.memoryBandwidth, --bandwidth in TB/s):
# an RTX 3060 has 3.6e11, an H200 4.8e12. Outside, a roofline share would be a wild number printed as fact.
MIN_MEMORY_BANDWIDTH = 1e9
MAX_MEMORY_BANDWIDTH = 1e14


def _years(ns: int) -> str:
    return f"{ns / 3.156e16:,.0f} years"


def _span(ns: int) -> str:
    """A span in the unit that reads best: 96 ms, 3.2 s, 2.5 h."""
    for unit, size in (("h", 3.6e12), ("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= size:
            return f"{ns / size:,.3g} {unit}"
    return f"{ns:,} ns"


def _times(frame: pl.DataFrame, start: str, end: str, what: str, path: str | Path, *, end_may_be_null: bool) -> None:
    """Refuse NULL starts (and ends), ends before starts, and timestamps out of any capture's range."""
    if frame.height == 0:
        return
    stats = frame.select(
        pl.col(start).null_count().alias("no_start"),
        pl.col(end).null_count().alias("no_end"),
        (pl.col(end) < pl.col(start)).sum().alias("backwards"),
        pl.min_horizontal(pl.col(start).min(), pl.col(end).min()).alias("lo"),
        pl.max_horizontal(pl.col(start).max(), pl.col(end).max()).alias("hi"),
    ).row(0, named=True)
    n = frame.height
    if stats["no_start"]:
        raise TraceError(
            path, f"{what}: {stats['no_start']:,} of {n:,} rows have no start time (nsys always writes one)"
        )
    if stats["no_end"] and not end_may_be_null:
        raise TraceError(path, f"{what}: {stats['no_end']:,} of {n:,} rows have no end time (column missing or NULL)")
    if stats["backwards"]:
        raise TraceError(path, f"{what}: {stats['backwards']:,} of {n:,} rows end before they start")
    lo, hi = stats["lo"], stats["hi"]
    if lo is not None and hi - lo >= MAX_TIMESTAMP:
        raise TraceError(path, f"{what}: timestamps from {lo:,} to {hi:,} ns span {_years(hi - lo)}, not one capture")
    if lo is not None and (hi >= MAX_TIMESTAMP or lo <= -MAX_TIMESTAMP):
        raise TraceError(
            path,
            f"{what}: timestamps from {lo:,} to {hi:,} ns (a span of {_span(hi - lo)}) lie beyond ±2^62 ns, "
            "where sums of times overflow; nsys writes times from its session's start",
        )


def validate(
    path: str | Path, gpu_ops: pl.DataFrame, api: pl.DataFrame, ranges: pl.DataFrame, strings: pl.DataFrame
) -> list[str]:
    """Raise :class:`TraceError` for impossible values; return notes for odd but usable ones (none yet).

    *ranges* are the raw NVTX range rows (``end`` NULL while a range is open).
    """
    notes: list[str] = []
    _times(gpu_ops, "start", "end", "GPU ops", path, end_may_be_null=False)
    _times(api, "start", "end", f"CUDA API calls ({S.RUNTIME})", path, end_may_be_null=False)
    _times(ranges, "start", "end", f"NVTX ranges ({S.NVTX})", path, end_may_be_null=True)
    if ranges.height and "global_tid" in ranges.columns and ranges["global_tid"].null_count() == ranges.height:
        raise TraceError(
            path, f"NVTX ranges ({S.NVTX}) carry no thread (globalTid is NULL): no launch can be placed in a range"
        )
    if strings.height and strings["id"].n_unique() != strings.height:
        dup = strings.filter(pl.col("id").is_duplicated())["id"]
        raise TraceError(
            path, f"StringIds: id {dup[0]} is given {int((dup == dup[0]).sum())} times (ids name one string each)"
        )
    _string_ids(path, gpu_ops, strings)
    notes += _zero_length_kernels(gpu_ops)
    if gpu_ops.height and api.height:
        if gpu_ops["correlation_id"].null_count() == gpu_ops.height:
            raise TraceError(
                path,
                "GPU ops carry no correlationId (the column is missing or empty): no op can be matched to the "
                "call that launched it",
            )
        # old exports log each runtime call twice; more repeats than that mean the ids are not ids
        ids = api.select(S.global_pid_from_tid("global_tid").alias("pid"), "correlation_id").drop_nulls()
        if ids.height - ids["correlation_id"].n_unique() > ids.height // 2:  # cheap test first, then per process
            top = ids.group_by("pid", "correlation_id").len().sort("len", descending=True).row(0)
            if top[2] > 2:
                raise TraceError(
                    path,
                    f"CUDA API calls: correlationId {top[1]} is shared by {top[2]:,} of {api.height:,} rows "
                    "(nsys numbers each call once, old exports twice): launches cannot be matched",
                )
    if ranges.height and (unclosed := ranges["end"].null_count()):
        notes.append(
            f"{unclosed:,} of {ranges.height:,} NVTX ranges never closed (no end time): attributed up to the last "
            "NVTX timestamp, left out of calls (nsys projects none of them)"
        )
    return notes


# Name columns (kernels' demangledName, ...) are read as Int32 (schema.GPU_OPS_SCHEMA): a StringIds id
# past this can be named by no op. nsys numbers its strings from 0 upwards.
MAX_STRING_ID = (1 << 31) - 1


def _string_ids(path: str | Path, gpu_ops: pl.DataFrame, strings: pl.DataFrame) -> None:
    """Refuse StringIds ids no name column can hold, and kernels whose name is no StringIds row
    (they would print as blank names)."""
    if strings.height:
        lo, hi = int_of(strings["id"].min()), int_of(strings["id"].max())
        if hi > MAX_STRING_ID or lo < 0:
            bad = hi if hi > MAX_STRING_ID else lo
            raise TraceError(
                path, f"{S.STRINGS}: id {bad:,} is outside 0–{MAX_STRING_ID:,} (nsys numbers its strings from 0)"
            )
    names = gpu_ops.filter(pl.col("kind") == "kernel")["name_id"] if gpu_ops.height else pl.Series([], dtype=pl.Int32)
    if names.len() == 0 or names.null_count() == names.len():
        return
    dense = strings.height and int_of(strings["id"].max()) - int_of(strings["id"].min()) + 1 == strings.height
    if (
        dense
        and int_of(strings["id"].min()) <= int_of(names.min())
        and int_of(names.max()) <= int_of(strings["id"].max())
    ):
        return  # every id in the dense range names a string: no search needed
    used = names.drop_nulls().unique()
    missing = used.filter(~used.is_in(strings["id"].cast(pl.Int64).implode()))
    if missing.len():
        rows = int(names.is_in(missing.implode()).sum())
        raise TraceError(
            path,
            f"{S.KERNEL}: demangledName of {rows:,} of {names.len():,} kernels is no {S.STRINGS} id "
            f"(e.g. {missing.min()}): their names are missing from the export",
        )


def _zero_length_kernels(gpu_ops: pl.DataFrame) -> list[str]:
    """A note when kernels last 0 ns: no real kernel does (a launch alone takes microseconds), yet the
    attribution of what the file says still holds; calls made only of them are left out (analysis.calls)."""
    if gpu_ops.height == 0:
        return []
    kernel = pl.col("kind") == "kernel"
    counts = gpu_ops.select(kernel.sum().alias("k"), (kernel & (pl.col("end") == pl.col("start"))).sum().alias("z"))
    kernels, zero = counts.row(0)
    if not zero:
        return []
    return [
        f"{zero:,} of {kernels:,} kernels last 0 ns (end = start in {S.KERNEL}): counted with no GPU time; "
        "a call made only of such ops is left out of calls"
    ]


def drop_repeated_rows(
    frame: pl.DataFrame, id_column: str, extra: pl.DataFrame | None = None
) -> tuple[pl.DataFrame, int]:
    """*frame* without the rows that repeat an earlier one in every column but *id_column* (and the
    columns of *extra*, joined on *id_column* = its ``row``), and how many were dropped.

    nsys writes each GPU op and each NVTX range once: an exact copy is an export duplicated by a tool,
    and would be counted twice (kernel sums doubled, twice the calls). Two real rows never share a
    start to the nanosecond on top of everything else, so only rows with a shared start are compared
    (the usual export has none: one ``n_unique``).
    """
    if frame.height < 2 or frame["start"].n_unique() == frame.height:
        return frame, 0
    candidates = frame.filter(pl.col("start").is_duplicated())
    if extra is not None:
        candidates = candidates.join(extra, left_on=id_column, right_on="row", how="left", maintain_order="left")
    same = [c for c in candidates.columns if c != id_column]
    repeats = candidates.filter(~pl.struct(same).is_first_distinct())[id_column]
    if repeats.len() == 0:
        return frame, 0
    return frame.filter(~pl.col(id_column).is_in(repeats.implode())), repeats.len()


# Range names are built per range (domain + ":" + message): one huge shared string would be
# copied into every range and every regex over them. Real names are short (the longest kernel
# name in the test exports is 4,236 characters, range names far less).
MAX_RANGE_NAME_CHARS = 1024


def shorten_long_names(
    strings: pl.DataFrame, text: pl.DataFrame, nvtx_ids: pl.Series | None = None
) -> tuple[pl.DataFrame, pl.DataFrame, str | None]:
    """StringIds values and NVTX text shortened to :data:`MAX_RANGE_NAME_CHARS` for naming ranges.

    Only NVTX names count: the inline NVTX text and the StringIds entries NVTX rows refer to
    (*nvtx_ids*, their textIds; all of StringIds when None). StringIds also holds kernel names and
    captured output, which can be far longer and are never a range's name. The frames are returned
    as they are (no copy) when no NVTX name is that long; otherwise a note says how long the longest was.
    """
    longest = 0
    out = []
    for frame, col in ((strings, "value"), (text, "text")):
        if frame.height == 0 or int_of(frame[col].str.len_bytes().max() or 0) <= MAX_RANGE_NAME_CHARS:
            out.append(frame)
            continue
        chars = frame[col].str.len_chars()
        named = chars if frame is text or nvtx_ids is None else chars.filter(frame["id"].is_in(nvtx_ids.implode()))
        longest = max(longest, int_of(named.max() or 0))
        out.append(
            frame.with_columns(
                pl.when(chars > MAX_RANGE_NAME_CHARS)
                .then(pl.col(col).str.slice(0, MAX_RANGE_NAME_CHARS - 1) + "…")
                .otherwise(pl.col(col))
            )
        )
    if longest <= MAX_RANGE_NAME_CHARS:  # no range is named by a long string: the frames as they are serve
        return strings, text, None
    note = (
        f"NVTX names longer than {MAX_RANGE_NAME_CHARS:,} characters (the longest: {longest:,}) are shortened "
        "in range names; kernel names and the trace keep them whole"
    )
    return out[0], out[1], note
