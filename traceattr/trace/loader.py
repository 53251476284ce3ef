"""Load an nsys export (SQLite, or an Arrow folder) into typed polars frames (:class:`Trace`).

Both readers hand over the same frames (:mod:`traceattr.trace.arrow_source` says why they can); an
``.nsys-rep`` is exported first (:func:`load_report`). Each table is declared with the columns
traceattr needs; a column that an older schema lacks is read as NULL, a table that is absent becomes
an empty typed frame plus a note (nsys exports lazily: no NVTX → no NVTX_EVENTS).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from traceattr.core.errors import NoDataError, TraceattrError, TraceError
from traceattr.core.keys import gather_by_key, rows_at
from traceattr.trace import schema as S
from traceattr.trace.arrow_source import ArrowSource, read_frames
from traceattr.trace.nsys import TRACE_SUFFIXES, is_arrow_export
from traceattr.trace.sqlite_source import Query, SqliteSource
from traceattr.trace.validate import (
    MAX_MEMORY_BANDWIDTH,
    MIN_MEMORY_BANDWIDTH,
    drop_repeated_rows,
    shorten_long_names,
    validate,
)

if TYPE_CHECKING:
    from polars._typing import PolarsDataType  # a DataType or its class: schemas here hold classes (pl.Int64)

REPORT_EXPORT_ENV = "TRACEATTR_REPORT_EXPORT"


@dataclass(frozen=True)
class TraceMeta:
    """What the export says about itself, plus what loading noticed."""

    path: Path
    engine: str
    nsys_version: str | None
    schema_version: str | None
    graph_trace_mode: str | None  # "node", "graph" or None when not recorded
    graph_launches: int  # cudaGraphLaunch calls seen
    graph_trace_rows: int  # CUPTI_ACTIVITY_KIND_GRAPH_TRACE rows (whole-graph records)
    duplicate_api_rows: int  # extra runtime rows sharing (pid, correlationId)
    export: Mapping[str, str] = field(default_factory=dict)
    capture: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    graph_node_ops: int = 0  # GPU ops that name their graph node (graphNodeId): recorded per node
    launch_config: bool = True  # the kernels' grid, block, registers and shared memory were read (else NULL)

    @property
    def graph_nodes_hidden(self) -> bool:
        """Graph kernels were recorded per launch, not per node (the capture's mode alone does not say:
        ops naming their graph node were recorded per node, whatever META_DATA_CAPTURE claims)."""
        per_launch = self.graph_trace_mode == "graph" and self.graph_launches > 0 and self.graph_node_ops == 0
        return self.graph_trace_rows > 0 or per_launch


@dataclass(frozen=True)
class Trace:
    """Typed frames of one export. Names stay StringIds ids until the edge."""

    meta: TraceMeta
    gpu_ops: pl.DataFrame
    api: pl.DataFrame
    ranges: pl.DataFrame
    marks: pl.DataFrame
    strings: pl.DataFrame  # id -> value
    devices: pl.DataFrame

    @property
    def path(self) -> Path:
        return self.meta.path


def _col(src: SqliteSource, table: str, column: str, alias: str) -> str:
    """``column AS alias``, or ``NULL AS alias`` when this schema lacks it."""
    if src.has_column(table, column):
        return f'"{column}" AS {alias}'
    return f"NULL AS {alias}"


def _present(
    src: SqliteSource, table: str, columns: Mapping[str, str], schema: Mapping[str, PolarsDataType]
) -> dict[str, str]:
    """The columns of *schema* that *table* holds, as {alias: nsys column}, in *schema*'s order.

    Only these are read: a value costs the same to fetch whether or not it is NULL (~0.1 µs
    each through ADBC, most of a load), so a column a schema lacks, or one a table never has
    (a kernel's byte count), is added afterwards as a typed NULL column (:func:`_with_nulls`).
    """
    return {
        a: columns[a]
        for a in schema
        if a not in ("start", "end") and a in columns and src.has_column(table, columns[a])
    }


def _select_list(src: SqliteSource, table: str, read: Mapping[str, str]) -> str:
    """start, end (NULL when missing: validation names the table) and the *read* columns."""
    ends = [_col(src, table, "start", "start"), _col(src, table, "end", "end")]
    return ", ".join([*ends, *(f'"{c}"' for c in read.values())])


def _with_nulls(frame: pl.DataFrame, schema: Mapping[str, PolarsDataType]) -> pl.DataFrame:
    """*frame* with every column of *schema* it lacks as NULL, in *schema*'s order."""
    absent = [pl.lit(None, t).alias(c) for c, t in schema.items() if c not in frame.columns]
    return frame.with_columns(absent).select(list(schema))


def _chunked_queries(
    src: SqliteSource, table: str, columns: Mapping[str, str], schema: Mapping[str, PolarsDataType]
) -> list[Query]:
    """One read per rowid chunk of *table*: start, end and the *columns* it holds, typed by *schema*."""
    read = _present(src, table, columns, schema)
    cols = _select_list(src, table, read)
    typed = {a: schema[a] for a in ("start", "end", *read)}
    return [
        Query(f'SELECT {cols} FROM "{table}" WHERE {chunk}', typed, f"reading {table}", rows=rows)
        for chunk, rows in src.row_chunks(table)
    ]


def _strings_query() -> Query:
    return Query(
        f'SELECT id, CAST(value AS BLOB) FROM "{S.STRINGS}" WHERE value IS NOT NULL',
        S.STRINGS_READ_SCHEMA,
        f"reading {S.STRINGS}",
        text=True,
    )


@dataclass(frozen=True)
class _NvtxQueries:
    ranges: list[Query]
    marks: Query
    domains: Query
    text: Query


def _nvtx_queries(src: SqliteSource) -> _NvtxQueries:
    """Ranges, marks and DomainCreate rows as separate reads: filtering in SQL
    spares a copy of a million-row frame per filter."""
    col = lambda c, a: _col(src, S.NVTX, c, a)  # noqa: E731
    payload = [c for c in S.NVTX_PAYLOAD_COLUMNS if src.has_column(S.NVTX, c)]
    payload_sql = f"COALESCE({', '.join(payload)})" if len(payload) > 1 else (payload[0] if payload else "NULL")
    range_types = ", ".join(map(str, S.RANGE_EVENT_TYPES))
    # style, pid and tid are derived in polars (:func:`_ranges_and_marks`): computed in SQL they were
    # three more values per row to fetch, the costly part of a read. end stays NULL for an unclosed range
    taken = ", ".join(col(c, a) for a, c in S.NVTX_RANGE_COLUMNS.items())
    range_cols = f"rowid, eventType, {taken}, {payload_sql} AS payload"
    ranges = [
        Query(f'SELECT {range_cols} FROM "{S.NVTX}" WHERE eventType IN ({range_types}) AND {chunk}',
              S.NVTX_RANGE_READ_SCHEMA, "reading NVTX ranges", rows=rows)
        for chunk, rows in src.row_chunks(S.NVTX)
    ]  # fmt: skip
    within = src.within(S.NVTX)  # a read of some ranges only (load_rows): the marks and text of their rows only,
    # and of every DomainCreate row (the domains' names)
    marks = Query(
        f"SELECT rowid, start, {col('globalTid', 'global_tid')}, {col('textId', 'text_id')}, "
        f'{col("domainId", "domain_id")} FROM "{S.NVTX}" WHERE eventType = {S.NVTX_MARK}{within}',
        S.NVTX_MARK_READ_SCHEMA,
        "reading NVTX marks",
    )
    domains = Query(
        f"SELECT rowid, start, {col('globalTid', 'global_tid')}, {col('domainId', 'domain_id')} "
        f'FROM "{S.NVTX}" WHERE eventType = {S.NVTX_DOMAIN_CREATE}',
        S.NVTX_DOMAIN_READ_SCHEMA,
        "reading NVTX domains",
    )
    types = ", ".join(map(str, S.NVTX_TEXT_EVENT_TYPES))
    texts = f'SELECT rowid, CAST(text AS BLOB) FROM "{S.NVTX}" WHERE text IS NOT NULL AND eventType '
    text = Query(
        # a part read (within): two reads, as an OR of the rowid spans with anything else is a scan testing every
        # span; every domain's name, the part's other text
        f"{texts}IN ({types})"
        if not within
        else f"{texts}IN ({types}) AND eventType != {S.NVTX_DOMAIN_CREATE}{within} "
        f"UNION ALL {texts}= {S.NVTX_DOMAIN_CREATE}",
        S.NVTX_TEXT_READ_SCHEMA,
        "reading NVTX text",
        text=True,
    )
    return _NvtxQueries(ranges, marks, domains, text)


def lookup_strings(ids: pl.Series, strings: pl.DataFrame) -> pl.Series:
    """StringIds values for *ids* (null where absent), in the order of *ids*.

    nsys numbers its strings densely, so this is a positional gather (no hash
    table, no copy of the text); a sparse table is searched (:mod:`traceattr.core.keys`).
    """
    return gather_by_key(strings["id"], strings["value"], ids).cast(pl.String).alias(ids.name)


def _label(
    events: pl.DataFrame, key: str, text: pl.DataFrame, strings: pl.DataFrame, domains: pl.DataFrame
) -> pl.DataFrame:
    """``domain, message, name`` for each NVTX row of *events*, in its order, as nsys names it.

    Only what differs is built: a million ranges named by registered strings alone share the message
    column with StringIds (no inline text to look up), and without domains the name is the message.
    """
    message = lookup_strings(events["text_id"], strings)
    if text.height:  # inline text: a row's own, where no registered string names it
        inline = rows_at(text, "row", events[key]).to_series()
        if inline.null_count() < inline.len():
            message = pl.select(pl.coalesce(message, inline)).to_series()
    message = message.alias("message")
    # few domains: a when-chain over (pid, domain id) costs less than a million-row join
    domain = pl.repeat(None, pl.len(), dtype=pl.String)
    for pid, dom, name in domains.iter_rows():
        # eq_missing: a NULL pid or domain id matches NULL (== would warn and match nothing)
        domain = (
            pl.when(pl.col("pid").eq_missing(pid) & pl.col("domain_id").eq_missing(dom))
            .then(pl.lit(name))
            .otherwise(domain)
        )
    named = events.select(domain.alias("domain")).to_series()
    unnamed = named.null_count()
    if unnamed == named.len():  # nsys's display rule: the domain prefixes the message only when it has a name
        return pl.DataFrame([named, message, message.alias("name")])
    labels = pl.DataFrame([named, message])
    full = pl.col("domain") + ":" + pl.col("message")  # a registered string wins over inline text (message)
    return labels.with_columns((full if not unnamed else pl.when(pl.col("domain").is_not_null()).then(full)
                                .otherwise(pl.col("message"))).alias("name"))  # fmt: skip


def _chunked_as(frame: pl.DataFrame, like: pl.Series) -> pl.DataFrame:
    """*frame*'s columns in chunks of *like*'s lengths: zero-copy slices, concatenated without a copy."""
    lengths = like.chunk_lengths()
    if len(lengths) <= 1:
        return frame
    offsets = [0, *accumulate(lengths)]
    return pl.DataFrame(
        [pl.concat([s.slice(o, n) for o, n in zip(offsets, lengths, strict=False)], rechunk=False) for s in frame]
    )


def _with_pid_tid(events: pl.DataFrame) -> pl.DataFrame:
    """*events* with the pid and tid packed in their globalTid, as nsys decodes them."""
    return events.with_columns(
        S.pid_from_global("global_tid").cast(pl.Int32).alias("pid"),
        S.tid_from_global("global_tid").cast(pl.Int32).alias("tid"),
    )


def _ranges_and_marks(
    ranges: pl.DataFrame, marks: pl.DataFrame, creates: pl.DataFrame, text: pl.DataFrame, strings: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    ranges, marks, creates = (_with_pid_tid(f) for f in (ranges, marks, creates))
    # Domain names: DomainCreate rows per (process, domain id), the first one wins.
    domains = (
        creates.join(text, on="row", how="inner")
        .sort("start", "row")
        .unique(["pid", "domain_id"], keep="first", maintain_order=True)
        .select("pid", "domain_id", pl.col("text").alias("domain"))
    )
    last_ts = ranges.select(pl.max_horizontal(pl.col("start").max(), pl.col("end").max())).item()
    # the labels cut as the ranges' read chunks are: a frame whose columns are chunked differently is copied
    # whole into one chunk per column by the next expression on it (nested: +33 MB held at the load's peak)
    labels = _chunked_as(_label(ranges, "range_id", text, strings, domains), ranges["start"])
    ranges = ranges.hstack(labels).with_columns(
        pl.when(pl.col("event_type").is_in(S.PUSHPOP_EVENT_TYPES))
        .then(pl.lit("PushPop"))
        .otherwise(pl.lit("StartEnd"))
        .cast(S.RangeStyle)
        .alias("style"),
        pl.col("end").is_not_null().alias("closed"),
        pl.col("end").fill_null(pl.lit(last_ts, pl.Int64)),  # unclosed: ends at the last NVTX timestamp, as nsys does
    )
    marks = marks.hstack(_label(marks, "mark_id", text, strings, domains))
    return ranges.select(list(S.RANGES_SCHEMA)), marks.select(list(S.MARKS_SCHEMA))


_GPU_NUMBERS = (  # TARGET_INFO_GPU column, our column
    ("id", "device_id"),
    ("smCount", "sm_count"),
    ("l2CacheSize", "l2_bytes"),
    ("totalMemory", "memory_bytes"),
    ("memoryBandwidth", "memory_bandwidth"),
    ("clockRate", "clock_hz"),
    ("computeMajor", "cc_major"),
    ("computeMinor", "cc_minor"),
)


def _whole(value: object) -> int | None:
    """*value* as an integer when it is a whole number (an int, or a REAL without fraction), else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _read_devices(src: SqliteSource | ArrowSource) -> tuple[pl.DataFrame, list[str]]:
    """One row per GPU, and notes on what TARGET_INFO_GPU holds that no GPU can have: such a value is
    read as unknown (the GPU facts only label and scale, so the export is still usable)."""
    if not src.has(S.GPU_INFO):
        return pl.DataFrame(schema=S.DEVICES_SCHEMA), []
    cols = [*_GPU_NUMBERS, ("name", "name"), ("chipName", "chip"), ("busLocation", "bus")]
    rows = src.rows(S.GPU_INFO, [c for c, _ in cols], f"reading {S.GPU_INFO}")  # a few rows: checked value by value
    notes: list[str] = []
    columns: dict[str, list[Any]] = {}  # per column its values: whole numbers or text (DEVICES_SCHEMA)
    for i, (nsys_column, column) in enumerate(_GPU_NUMBERS):
        values = [row[i] for row in rows]
        numbers = [_whole(v) for v in values]
        bad = [v for v, n in zip(values, numbers, strict=True) if v is not None and n is None]
        if bad:
            notes.append(f"{S.GPU_INFO}: {nsys_column} holds {bad[0]!r} in {len(bad)} row(s), not a whole number: "
                         "read as unknown")  # fmt: skip
        columns[column] = numbers
    bandwidth = [b for b in columns["memory_bandwidth"] if b is not None]
    implausible = [b for b in bandwidth if not MIN_MEMORY_BANDWIDTH <= b <= MAX_MEMORY_BANDWIDTH]
    if implausible:
        notes.append(
            f"{S.GPU_INFO}: memoryBandwidth {implausible[0]:,} bytes/s is no GPU's (expected "
            f"{MIN_MEMORY_BANDWIDTH / 1e9:,.0f} GB/s to {MAX_MEMORY_BANDWIDTH / 1e12:,.0f} TB/s): ignored (a roofline "
            "takes the datasheet's figure for the GPU's name, when known)"
        )
        columns["memory_bandwidth"] = [None if b in implausible else b for b in columns["memory_bandwidth"]]
    n = len(_GPU_NUMBERS)
    for j, (_, column) in enumerate(cols[n:]):
        columns[column] = [None if row[n + j] is None else str(row[n + j]) for row in rows]
    df = pl.DataFrame(columns, schema={c: S.DEVICES_SCHEMA[c] for _, c in cols}).select(list(S.DEVICES_SCHEMA))
    repeated = df.filter(pl.col("device_id").is_duplicated())
    if repeated.height:
        first = repeated.filter(pl.col("device_id").eq_missing(repeated["device_id"][0]))
        how = "identical" if first.unique().height == 1 else "that differ"
        notes.append(
            f"{S.GPU_INFO} lists GPU {first['device_id'][0]} in {first.height} rows ({how}): the first is used"
        )
    return df.unique("device_id", keep="first").sort("device_id"), notes


def _read_key_values(src: SqliteSource | ArrowSource, table: str) -> dict[str, str]:
    if not src.has(table):
        return {}
    rows = src.rows(table, ["name", "value"], f"reading {table}")
    return {str(k): "" if v is None else str(v) for k, v in rows}


def _graph_mode(capture: Mapping[str, str]) -> str | None:
    for key, value in capture.items():
        if key.endswith("CUDA_GRAPH_TRACE_OPTIONS:MODE"):
            return value.strip().lower() or None
    return None


def _repeated_calls(api: pl.DataFrame) -> int:
    """Runtime rows beyond the first per (process, correlationId)."""
    if api.height == 0:
        return 0
    procs = api.select(S.global_pid_from_tid("global_tid").alias("p")).unique()
    if procs.height == 1:  # the usual single-process capture: no struct hashing
        return api.height - api["correlation_id"].n_unique()
    per = api.group_by(S.global_pid_from_tid("global_tid").alias("p")).agg(
        pl.col("correlation_id").n_unique().alias("u")
    )
    return api.height - int(per["u"].sum())


def _concat(parts: list[pl.DataFrame], schema: Mapping[str, PolarsDataType]) -> pl.DataFrame:
    """The read chunks of a table as one frame; a column that holds no value at all becomes a single
    NULL broadcast over the rows (polars keeps one value, not a buffer and mask per row: the sweep's
    graph node ids, end threads and payloads are 26 MB of NULLs read)."""
    if not parts:
        return pl.DataFrame(schema=dict(schema))
    frame = pl.concat(parts, how="vertical", rechunk=False)
    empty = [c for c in frame.columns if frame.height and frame[c].null_count() == frame.height]
    return frame.with_columns(pl.lit(None, frame.schema[c]).alias(c) for c in empty) if empty else frame


def load_trace(
    path: str | Path, engine: str = "auto", *, shown_as: str | Path | None = None, launch_config: bool = True
) -> Trace:
    """Read *path* without modifying it: an nsys SQLite export, an nsys Arrow export folder
    (``nsys export --type arrowdir``), or an ``.nsys-rep`` report, exported first (:func:`load_report`).

    *engine* picks the SQLite reader (:class:`SqliteSource`); *shown_as* is the name an Arrow folder's
    trace carries (the report it came from); without *launch_config* the kernels' launch configuration
    (:data:`~traceattr.trace.schema.LAUNCH_CONFIG`) is not read but NULL, for a command that shows no op
    (sweep: 11 M values, ~0.4 s of CPU and 45 MB). Raises :class:`TraceError` for anything that is not a
    usable export, :class:`NoDataError` for an export with no GPU work at all.
    """
    p = Path(path)
    if p.suffix in TRACE_SUFFIXES and not p.is_dir():
        return load_report(p, engine, launch_config=launch_config)
    src: SqliteSource | ArrowSource = ArrowSource(p, shown_as) if is_arrow_export(p) else SqliteSource(p, engine)
    try:
        return _load(src, launch_config)
    finally:
        src.close()


@dataclass(frozen=True)
class RowIds:
    """Where a loaded SQLite export's GPU ops and CUDA API rows lie in their tables, so that some of them can be
    read again by rowid (:func:`load_rows`): each op table in op_id order as (table, first rowid, rows), the
    runtime table's first rowid; every table's rowids dense, as nsys numbers them."""

    path: Path
    ops: tuple[tuple[str, int, int], ...]
    api_first: int

    def spans(self, ops: Sequence[tuple[int, int]], api: Sequence[tuple[int, int]]) -> dict[str, list[tuple[int, int]]]:
        """The rowid spans of each op table and of the runtime table that hold the op_id spans *ops* and the
        api_id spans *api* (both inclusive)."""
        out: dict[str, list[tuple[int, int]]] = {S.RUNTIME: _merged([(a + self.api_first, b + self.api_first)
                                                                      for a, b in api])}  # fmt: skip
        offset = 0
        for table, first, rows in self.ops:
            inside = [(max(a, offset), min(b, offset + rows - 1)) for a, b in ops]
            out[table] = _merged([(first + a - offset, first + b - offset) for a, b in inside if a <= b])
            offset += rows
        return out


def may_read_again(path: Path) -> bool:
    """Whether rows of *path* can be read again by rowid at all: an SQLite export, not an Arrow export or a
    report (read through a temporary export); :func:`row_ids` tells once the trace is loaded."""
    return not (path.is_dir() or path.suffix in TRACE_SUFFIXES)


def row_ids(path: Path, trace: Trace) -> RowIds | None:
    """The :class:`RowIds` of *trace*, loaded from the SQLite export *path*; None where its rows cannot be found
    again by rowid: not :func:`may_read_again`, a table whose rowids are not dense, rows the load dropped or
    merged (repeated rows), or old exports' runtime calls logged twice."""
    if not may_read_again(path) or trace.meta.duplicate_api_rows:
        return None
    kinds = dict(trace.gpu_ops["kind"].cast(pl.String).value_counts().iter_rows())
    src = SqliteSource(path)
    try:
        if not src.has(S.RUNTIME):
            return None
        layout = []
        for table in [*_op_tables(src), S.RUNTIME]:
            # the rows loaded from the table fill its rowids from the least to the greatest: so it holds no more
            # rows than these (the load dropped none) and they are dense (SQLite finds both ends in the b-tree)
            lo, hi = (src.scalar_rows(f'SELECT {end}(rowid) FROM "{table}"', "sizing")[0][0] for end in ("min", "max"))
            rows = trace.api.height if table == S.RUNTIME else kinds.pop(S.OP_SOURCES[table][0], 0)
            if (lo is None and rows) or (lo is not None and hi - lo + 1 != rows):
                return None
            layout.append((table, lo or 0, rows))
    finally:
        src.close()
    if kinds:  # ops of a kind that no table read here holds
        return None
    return RowIds(path, tuple(layout[:-1]), layout[-1][1])


def load_rows(rows: RowIds, ranges: Sequence[tuple[int, int]], ops: Sequence[tuple[int, int]],
              api: Sequence[tuple[int, int]]) -> Trace:  # fmt: skip
    """The part of the export :func:`row_ids` described that the spans name (inclusive): NVTX ranges by range_id
    (their rowid), GPU ops by op_id and CUDA API rows by api_id, as :func:`load_trace` reads them (its own ids
    numbering the rows read); its marks, domains, strings and GPUs whole. A few calls' rows read again, not the
    whole trace held until they are known."""
    src = SqliteSource(rows.path)
    try:
        src.only = {S.NVTX: _merged(list(ranges)), **rows.spans(ops, api)}
        return _load(src)
    finally:
        src.close()


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive *spans* sorted, those that overlap or touch made one."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def read_devices(path: str | Path) -> pl.DataFrame:
    """The GPUs (TARGET_INFO_GPU) of the SQLite or Arrow export *path*, and nothing else: a few rows, read
    without the trace (what a roofline needs of a run folder whose trace is not otherwise read)."""
    p = Path(path)
    src: SqliteSource | ArrowSource = ArrowSource(p) if is_arrow_export(p) else SqliteSource(p)
    try:
        return _read_devices(src)[0]
    finally:
        src.close()


def load_report(report: Path, engine: str = "auto", *, launch_config: bool = True) -> Trace:
    """An ``.nsys-rep`` read through a temporary Arrow export of the tables the loader reads: export and
    read together took 0.57x the SQLite export and read on a 100 k-kernel H200 report with every table
    exported, and a fraction of it where a report holds tables traceattr does not read (--tables;
    benchmarks/HISTORY.md). Through an SQLite export instead (kept beside the report,
    :func:`~traceattr.trace.nsys.export_sqlite`) when a fresh one is there already, when nsys cannot write
    Arrow, when the capture's graph mode decides (:func:`_graph_mode_decides`), or when
    ``TRACEATTR_REPORT_EXPORT=sqlite``."""
    from traceattr.trace import nsys

    fresh = nsys.fresh_sqlite_export(report)
    if fresh is None and report_export() == "arrow":
        with nsys.arrow_export(report) as folder:
            if folder is not None:
                trace = load_trace(folder, shown_as=report, launch_config=launch_config)
                if trace.meta.graph_trace_mode is not None or not _graph_mode_decides(trace.meta):
                    return trace
    return load_trace(fresh or nsys.export_sqlite(report), engine, launch_config=launch_config)


def _graph_mode_decides(meta: TraceMeta) -> bool:
    """Whether the capture's CUDA graph mode, which an Arrow export lacks (nsys 2023.4 writes no
    META_DATA_CAPTURE there), changes what the trace says: graph launches whose kernels name no graph
    node, without whole-graph records, are hidden kernels only if the graphs were traced whole. Old
    exports only; the SQLite export has the mode."""
    return meta.graph_launches > 0 and meta.graph_node_ops == 0 and meta.graph_trace_rows == 0


def report_export() -> str:
    """How a report is exported for reading: ``arrow`` (the default) or ``sqlite`` (``TRACEATTR_REPORT_EXPORT``)."""
    chosen = os.environ.get(REPORT_EXPORT_ENV, "").strip().lower() or "arrow"
    if chosen not in ("arrow", "sqlite"):
        raise TraceattrError(f"{REPORT_EXPORT_ENV}={chosen!r}: expected arrow or sqlite")
    return chosen


def _load(src: SqliteSource | ArrowSource, launch_config: bool = True) -> Trace:
    op_tables = _op_tables(src)
    strings, gpu_ops, api, nvtx_frames = _read(src, op_tables, launch_config)
    ranges, marks, notes = _labelled_nvtx(src.path, nvtx_frames, gpu_ops, api, strings)
    del nvtx_frames
    gpu_ops, repeated = drop_repeated_rows(gpu_ops, "op_id")
    if repeated:
        gpu_ops = gpu_ops.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("op_id"))  # op_id == row
        notes.append(f"{repeated:,} GPU op rows repeat another row exactly (every column): counted once")
    devices, device_notes = _read_devices(src)
    notes += device_notes
    meta = dataclasses.replace(_meta(src, gpu_ops, api, strings, notes), launch_config=launch_config)
    # the frames stay in their read chunks (one per rowid chunk), each already in polars' own memory
    # (SqliteSource.read): copied into one buffer per column, whole or a column at a time, they took
    # more memory at once (sweep: 830 -> 920 MB), not less
    return Trace(meta, gpu_ops, api, ranges, marks, strings, devices)


def _op_tables(src: SqliteSource | ArrowSource) -> list[str]:
    """The GPU-op tables of an nsys export; refuses anything else, and an export with no GPU work."""
    path = src.path
    if not src.tables:
        raise TraceError(path, "is an empty SQLite database, not an nsys export")
    if not src.has(S.STRINGS):
        raise TraceError(path, "is not an nsys export (no StringIds table)")
    op_tables = [t for t in S.OP_SOURCES if src.has(t)]
    if not op_tables and not src.has(S.RUNTIME):
        raise NoDataError(
            path, "holds no CUDA trace (no CUPTI_ACTIVITY_KIND_* tables); capture with nsys profile -t cuda,nvtx"
        )
    if not op_tables:
        raise NoDataError(path, "holds CUDA API calls but no GPU operations (no kernel, memcpy or memset tables)")
    return op_tables


def _read(
    src: SqliteSource | ArrowSource, op_tables: list[str], launch_config: bool = True
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, tuple[pl.DataFrame, ...] | None]:
    """strings, GPU ops, runtime calls, and the NVTX frames as read (ranges, marks, DomainCreate rows,
    text; None without an NVTX table), from either kind of export."""
    nvtx_frames: tuple[pl.DataFrame, ...] | None
    if isinstance(src, ArrowSource):
        read = read_frames(src, op_tables, launch_config)
        strings, nvtx_frames = read.strings, read.nvtx
        api_parts, op_parts = [read.api] if read.api is not None else [], {t: [f] for t, f in read.ops.items()}
    else:
        strings, api_parts, op_parts, nvtx_frames = _read_sqlite(src, op_tables, launch_config)
    api = _with_nulls(_concat(api_parts, S.API_READ_SCHEMA), S.API_READ_SCHEMA)
    parts = [
        _with_nulls(_concat(frames, S.OP_READ_SCHEMA), S.OP_READ_SCHEMA).with_columns(
            pl.lit(S.OP_SOURCES[t][0], S.OpKind).alias("kind")
        )
        for t, frames in op_parts.items()
    ]
    gpu_ops = (
        pl.concat(parts, how="vertical", rechunk=False)
        .with_row_index("op_id")
        .with_columns(pl.col("op_id").cast(pl.Int64))
        .select(list(S.GPU_OPS_SCHEMA))
    )
    api = api.with_row_index("api_id").with_columns(pl.col("api_id").cast(pl.Int64)).select(list(S.API_SCHEMA))
    if nvtx_frames is None:
        return strings, gpu_ops, api, None
    ranges, *rest = nvtx_frames
    return strings, gpu_ops, api, (_concat([ranges], S.NVTX_RANGE_READ_SCHEMA), *rest)


def _read_sqlite(
    src: SqliteSource, op_tables: list[str], launch_config: bool = True
) -> tuple[pl.DataFrame, list[pl.DataFrame], dict[str, list[pl.DataFrame]], tuple[pl.DataFrame, ...] | None]:
    """One batch of reads, run in parallel, big tables in rowid chunks: strings, the runtime table's
    chunks, each op table's chunks, and the NVTX frames (the ranges' chunks concatenated)."""
    op_queries = {t: _chunked_queries(src, t, S.op_columns(t, launch_config), S.OP_READ_SCHEMA) for t in op_tables}
    api_queries = _chunked_queries(src, S.RUNTIME, S.API_COLUMNS, S.API_READ_SCHEMA) if src.has(S.RUNTIME) else []
    nvtx = _nvtx_queries(src) if src.has(S.NVTX) else None
    nvtx_batch = [*nvtx.ranges, nvtx.marks, nvtx.domains, nvtx.text] if nvtx else []
    batch = [_strings_query(), *api_queries, *nvtx_batch, *(q for qs in op_queries.values() for q in qs)]
    frames = iter(src.read_all(batch))
    strings = next(frames)
    api_parts = [next(frames) for _ in api_queries]
    nvtx_frames = [next(frames) for _ in nvtx_batch]
    op_parts = {t: [next(frames) for _ in qs] for t, qs in op_queries.items()}
    if nvtx is None:
        return strings, api_parts, op_parts, None
    n = len(nvtx.ranges)
    ranges = pl.concat(nvtx_frames[:n], how="vertical", rechunk=False)
    return strings, api_parts, op_parts, (ranges, *nvtx_frames[n:])


def _labelled_nvtx(
    path: Path,
    nvtx_frames: tuple[pl.DataFrame, ...] | None,
    gpu_ops: pl.DataFrame,
    api: pl.DataFrame,
    strings: pl.DataFrame,
) -> tuple[pl.DataFrame, pl.DataFrame, list[str]]:
    """Ranges and marks named as nsys names them, after the whole export is validated; and the notes."""
    if nvtx_frames is None:
        notes = validate(path, gpu_ops, api, pl.DataFrame(schema={"start": pl.Int64, "end": pl.Int64}), strings)
        return pl.DataFrame(schema=S.RANGES_SCHEMA), pl.DataFrame(schema=S.MARKS_SCHEMA), list(notes)
    ranges, marks, creates, text = nvtx_frames
    notes = list(validate(path, gpu_ops, api, ranges, strings))
    ranges, repeated = drop_repeated_rows(ranges, "range_id", text)
    if repeated:
        notes.append(f"{repeated:,} NVTX ranges repeat another exactly (thread, times and name): counted once")
    nvtx_ids = pl.concat([ranges["text_id"], marks["text_id"]]).drop_nulls().unique()
    range_strings, text, note = shorten_long_names(strings, text, nvtx_ids)
    notes += [note] if note else []
    ranges, marks = _ranges_and_marks(ranges, marks, creates, text, range_strings)
    return ranges, marks, notes


def _meta(
    src: SqliteSource | ArrowSource, gpu_ops: pl.DataFrame, api: pl.DataFrame, strings: pl.DataFrame, notes: list[str]
) -> TraceMeta:
    """What the export says about itself (versions, capture options, graph tracing), with *notes* and
    what loading noticed appended to them."""
    export_meta: dict[str, str] = {}
    for table in S.EXPORT_META_TABLES:
        export_meta |= _read_key_values(src, table)
    capture_meta = _read_key_values(src, S.CAPTURE_META)

    if not src.has(S.RUNTIME):
        notes.append("no CUDA API table: every GPU op is unattributed")
    if not src.has(S.NVTX):
        notes.append("no NVTX_EVENTS table (nothing was annotated): every GPU op is unattributed")
    if gpu_ops.height and gpu_ops["global_pid"].null_count() == gpu_ops.height:
        notes.append("GPU ops carry no globalPid: launches matched on correlationId alone")

    launch_names = strings.filter(pl.col("value").str.starts_with("cudaGraphLaunch"))["id"]
    graph_launches = api.filter(pl.col("name_id").is_in(launch_names.implode())).height if api.height else 0
    graph_trace_rows = gpu_ops.filter(pl.col("kind") == "graph").height
    graph_node_ops = gpu_ops.height - gpu_ops["graph_node_id"].null_count()
    dup = _repeated_calls(api)
    if dup:
        notes.append(f"{dup} CUDA API rows repeat a (process, correlationId) (old exports log runtime calls twice)")
    meta = TraceMeta(
        path=src.path,
        engine=src.engine,
        nsys_version=export_meta.get("EXPORT_PRODUCT_VERSION"),
        schema_version=export_meta.get("EXPORT_SCHEMA_VERSION"),
        graph_trace_mode=_graph_mode(capture_meta),
        graph_launches=graph_launches,
        graph_trace_rows=graph_trace_rows,
        duplicate_api_rows=dup,
        graph_node_ops=graph_node_ops,
        export=export_meta,
        capture=capture_meta,
        notes=tuple(notes),
    )
    if meta.graph_nodes_hidden:
        notes.append(
            f"CUDA graphs traced whole ({graph_trace_rows} graph launches as single records): kernels inside "
            "graphs are invisible; capture with --cuda-graph-trace=node to see them"
        )
        meta = dataclasses.replace(meta, notes=tuple(notes))
    return meta
