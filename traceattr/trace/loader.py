"""Load an nsys SQLite export into typed polars frames (:class:`Trace`).

Each table is declared with the columns traceattr needs; a column that an
older schema lacks is read as NULL, a table that is absent becomes an empty
typed frame plus a note (nsys exports lazily: no NVTX → no NVTX_EVENTS).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from traceattr.errors import NoDataError, TraceError
from traceattr.trace import schema as S
from traceattr.trace.sqlite_source import SqliteSource


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

    @property
    def graph_nodes_hidden(self) -> bool:
        """Graph kernels were recorded per launch, not per node."""
        return self.graph_trace_rows > 0 or (self.graph_trace_mode == "graph" and self.graph_launches > 0)


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


def _select(src: SqliteSource, table: str, columns: Sequence[tuple[str, str]], where: str = "") -> str:
    cols = ", ".join(_col(src, table, c, a) for c, a in columns)
    return f'SELECT {cols} FROM "{table}"' + (f" WHERE {where}" if where else "")


_COMMON_OP_COLUMNS = [
    ("start", "start"),
    ("end", "end"),
    ("deviceId", "device_id"),
    ("contextId", "context_id"),
    ("streamId", "stream_id"),
    ("correlationId", "correlation_id"),
    ("globalPid", "global_pid"),
]
_OP_COLUMNS: dict[str, list[tuple[str, str]]] = {
    S.KERNEL: [
        ("demangledName", "name_id"),
        ("shortName", "short_name_id"),
        ("mangledName", "mangled_name_id"),
        ("gridX", "grid_x"),
        ("gridY", "grid_y"),
        ("gridZ", "grid_z"),
        ("blockX", "block_x"),
        ("blockY", "block_y"),
        ("blockZ", "block_z"),
        ("registersPerThread", "registers_per_thread"),
        ("staticSharedMemory", "static_smem"),
        ("dynamicSharedMemory", "dynamic_smem"),
        ("graphNodeId", "graph_node_id"),
        ("graphId", "graph_id"),
    ],
    S.MEMCPY: [("bytes", "bytes"), ("copyKind", "copy_kind"), ("graphNodeId", "graph_node_id")],
    S.MEMSET: [("bytes", "bytes"), ("graphNodeId", "graph_node_id")],
    S.GRAPH_TRACE: [("graphId", "graph_id")],
}
_OP_TABLE_KIND = {S.KERNEL: "kernel", S.MEMCPY: "memcpy", S.MEMSET: "memset", S.GRAPH_TRACE: "graph"}
_OP_READ_SCHEMA = {k: v for k, v in S.GPU_OPS_SCHEMA.items() if k not in ("op_id", "kind", "pid")}


def _read_gpu_ops(src: SqliteSource) -> pl.DataFrame:
    parts = []
    for table, kind in _OP_TABLE_KIND.items():
        if not src.has(table):
            continue
        wanted = dict(_COMMON_OP_COLUMNS + _OP_COLUMNS[table])
        columns = [(col, alias) for col, alias in wanted.items()]
        # every alias of the union schema, NULL where this table has none
        present = {alias for _, alias in columns}
        sql_cols = [_col(src, table, col, alias) for col, alias in columns]
        sql_cols += [f"NULL AS {a}" for a in _OP_READ_SCHEMA if a not in present]
        order = {a: i for i, a in enumerate(_OP_READ_SCHEMA)}
        sql_cols.sort(key=lambda s: order[s.rsplit(" AS ", 1)[1]])
        sql = f'SELECT {", ".join(sql_cols)} FROM "{table}"'
        df = src.frame(sql, _OP_READ_SCHEMA, f"reading {table}")
        parts.append(df.with_columns(pl.lit(kind, S.OpKind).alias("kind")))
    if not parts:
        return pl.DataFrame(schema=S.GPU_OPS_SCHEMA)
    ops = pl.concat(parts, how="vertical")
    return ops.with_row_index("op_id").with_columns(
        pl.col("op_id").cast(pl.Int64), S.pid_from_global("global_pid").alias("pid")
    ).select(list(S.GPU_OPS_SCHEMA))


_API_READ_SCHEMA = {
    "start": pl.Int64,
    "end": pl.Int64,
    "event_class": pl.Int64,
    "global_tid": pl.Int64,
    "correlation_id": pl.Int64,
    "name_id": pl.Int64,
    "return_value": pl.Int64,
}


def _read_api(src: SqliteSource) -> pl.DataFrame:
    if not src.has(S.RUNTIME):
        return pl.DataFrame(schema=S.API_SCHEMA)
    sql = _select(
        src,
        S.RUNTIME,
        [
            ("start", "start"),
            ("end", "end"),
            ("eventClass", "event_class"),
            ("globalTid", "global_tid"),
            ("correlationId", "correlation_id"),
            ("nameId", "name_id"),
            ("returnValue", "return_value"),
        ],
    )
    api = src.frame(sql, _API_READ_SCHEMA, f"reading {S.RUNTIME}")
    return (
        api.with_row_index("api_id")
        .with_columns(
            pl.col("api_id").cast(pl.Int64),
            S.global_pid_from_tid("global_tid").alias("global_pid"),
            S.pid_from_global("global_tid").alias("pid"),
            S.tid_from_global("global_tid").alias("tid"),
        )
        .select(list(S.API_SCHEMA))
    )


def _read_strings(src: SqliteSource) -> pl.DataFrame:
    return src.text_frame(
        f'SELECT id, CAST(value AS BLOB) FROM "{S.STRINGS}" WHERE value IS NOT NULL',
        "id",
        pl.Int64,
        "value",
        "reading StringIds",
    )


def _nvtx_text(src: SqliteSource, event_types: Sequence[int]) -> pl.DataFrame:
    types = ", ".join(str(t) for t in event_types)
    return src.text_frame(
        f'SELECT rowid, CAST(text AS BLOB) FROM "{S.NVTX}" WHERE text IS NOT NULL AND eventType IN ({types})',
        "row",
        pl.Int64,
        "text",
        "reading NVTX text",
    )


def _payload_expr(src: SqliteSource) -> str:
    cols = [c for c in ("int64Value", "uint64Value", "int32Value", "uint32Value") if src.has_column(S.NVTX, c)]
    return f"COALESCE({', '.join(cols)})" if len(cols) > 1 else (cols[0] if cols else "NULL")


def _domains(src: SqliteSource, strings: pl.DataFrame) -> pl.DataFrame:
    """Domain names per (pid, domain_id), from DomainCreate rows (first one wins)."""
    rows = src.frame(
        f'SELECT rowid, start, domainId, globalTid FROM "{S.NVTX}" WHERE eventType = {S.NVTX_DOMAIN_CREATE}',
        {"row": pl.Int64, "start": pl.Int64, "domain_id": pl.Int64, "global_tid": pl.Int64},
        "reading NVTX domains",
    )
    text = _nvtx_text(src, [S.NVTX_DOMAIN_CREATE])
    return (
        rows.join(text, on="row", how="left")
        .filter(pl.col("text").is_not_null())
        .with_columns(S.pid_from_global("global_tid").alias("pid"))
        .sort("start", "row")
        .unique(["pid", "domain_id"], keep="first", maintain_order=True)
        .select("pid", "domain_id", pl.col("text").alias("domain"))
    )


def _read_ranges_and_marks(src: SqliteSource, strings: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    if not src.has(S.NVTX):
        return pl.DataFrame(schema=S.RANGES_SCHEMA), pl.DataFrame(schema=S.MARKS_SCHEMA)
    types = (*S.RANGE_EVENT_TYPES, S.NVTX_MARK)
    sql = (
        f"SELECT rowid, start, end, eventType, {_col(src, S.NVTX, 'globalTid', 'global_tid')}, "
        f"{_col(src, S.NVTX, 'endGlobalTid', 'end_global_tid')}, {_col(src, S.NVTX, 'textId', 'text_id')}, "
        f"{_col(src, S.NVTX, 'domainId', 'domain_id')}, {_col(src, S.NVTX, 'category', 'category')}, "
        f"{_col(src, S.NVTX, 'color', 'color')}, {_payload_expr(src)} AS payload "
        f'FROM "{S.NVTX}" WHERE eventType IN ({", ".join(map(str, types))})'
    )
    schema = {
        "row": pl.Int64,
        "start": pl.Int64,
        "end": pl.Int64,
        "event_type": pl.Int64,
        "global_tid": pl.Int64,
        "end_global_tid": pl.Int64,
        "text_id": pl.Int64,
        "domain_id": pl.Int64,
        "category": pl.Int64,
        "color": pl.Int64,
        "payload": pl.Int64,
    }
    ev = src.frame(sql, schema, "reading NVTX_EVENTS")
    text = _nvtx_text(src, types)
    domains = _domains(src, strings)
    ev = (
        ev.join(text, on="row", how="left")
        .join(strings.rename({"id": "text_id", "value": "registered"}), on="text_id", how="left")
        .with_columns(S.pid_from_global("global_tid").alias("pid"), S.tid_from_global("global_tid").alias("tid"))
        .join(domains, on=["pid", "domain_id"], how="left")
        .with_columns(pl.coalesce("registered", "text").alias("message"))
        .with_columns(
            # nsys's display rule: a registered string wins over inline text, and
            # the domain prefixes it only when the domain has a name.
            pl.when(pl.col("domain").is_not_null())
            .then(pl.col("domain") + ":" + pl.col("message"))
            .otherwise(pl.col("message"))
            .alias("name")
        )
    )
    range_types = list(S.RANGE_EVENT_TYPES)
    is_range = pl.col("event_type").is_in(range_types)
    bounds = ev.filter(is_range).select(pl.min_horizontal(pl.col("start").min(), pl.col("end").min()).alias("lo"),
                                        pl.max_horizontal(pl.col("start").max(), pl.col("end").max()).alias("hi"))
    last_ts = bounds["hi"][0] if bounds.height else None
    ranges = (
        ev.filter(is_range)
        .with_columns(
            pl.col("end").is_not_null().alias("closed"),
            pl.col("end").fill_null(last_ts).alias("end"),
            pl.when(pl.col("event_type").is_in(list(S.PUSHPOP_EVENT_TYPES)))
            .then(pl.lit("PushPop"))
            .otherwise(pl.lit("StartEnd"))
            .cast(S.RangeStyle)
            .alias("style"),
        )
        .rename({"row": "range_id"})
        .select(list(S.RANGES_SCHEMA))
        .cast(S.RANGES_SCHEMA)
        .sort("range_id")
    )
    marks = (
        ev.filter(pl.col("event_type") == S.NVTX_MARK)
        .rename({"row": "mark_id", "start": "time"})
        .select(list(S.MARKS_SCHEMA))
        .cast(S.MARKS_SCHEMA)
    )
    return ranges, marks


def _read_devices(src: SqliteSource) -> pl.DataFrame:
    if not src.has(S.GPU_INFO):
        return pl.DataFrame(schema=S.DEVICES_SCHEMA)
    numeric = [
        ("id", "device_id"),
        ("smCount", "sm_count"),
        ("l2CacheSize", "l2_bytes"),
        ("totalMemory", "memory_bytes"),
        ("memoryBandwidth", "memory_bandwidth"),
        ("clockRate", "clock_hz"),
        ("computeMajor", "cc_major"),
        ("computeMinor", "cc_minor"),
    ]
    rows = src.scalar_rows(
        _select(src, S.GPU_INFO, numeric + [("name", "name"), ("chipName", "chip"), ("busLocation", "bus")]),
        "reading TARGET_INFO_GPU",
    )
    names = [a for _, a in numeric] + ["name", "chip", "bus"]
    df = pl.DataFrame(rows, schema=names, orient="row", infer_schema_length=None)
    return df.select(list(S.DEVICES_SCHEMA)).cast(S.DEVICES_SCHEMA).unique("device_id", keep="first").sort("device_id")


def _read_key_values(src: SqliteSource, table: str) -> dict[str, str]:
    if not src.has(table):
        return {}
    rows = src.scalar_rows(f'SELECT name, value FROM "{table}"', f"reading {table}")
    return {str(k): "" if v is None else str(v) for k, v in rows}


def _graph_mode(capture: Mapping[str, str]) -> str | None:
    for key, value in capture.items():
        if key.endswith("CUDA_GRAPH_TRACE_OPTIONS:MODE"):
            return value.strip().lower() or None
    return None


def load_trace(path: str | Path, engine: str = "auto") -> Trace:
    """Read *path* (an nsys SQLite export) without modifying it.

    Raises :class:`TraceError` for anything that is not a usable export,
    :class:`NoDataError` for an export with no GPU work at all.
    """
    src = SqliteSource(path, engine)
    try:
        return _load(src)
    finally:
        src.close()


def _load(src: SqliteSource) -> Trace:
    path = src.path
    if not src.tables:
        raise TraceError(path, "is an empty SQLite database, not an nsys export")
    if not src.has(S.STRINGS):
        raise TraceError(path, "is not an nsys export (no StringIds table)")
    op_tables = [t for t in _OP_TABLE_KIND if src.has(t)]
    if not op_tables and not src.has(S.RUNTIME):
        raise NoDataError(
            path, "holds no CUDA trace (no CUPTI_ACTIVITY_KIND_* tables); capture with nsys profile -t cuda,nvtx"
        )
    if not op_tables:
        raise NoDataError(path, "holds CUDA API calls but no GPU operations (no kernel, memcpy or memset tables)")

    notes: list[str] = []
    strings = _read_strings(src)
    gpu_ops = _read_gpu_ops(src)
    api = _read_api(src)
    ranges, marks = _read_ranges_and_marks(src, strings)
    devices = _read_devices(src)
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
    mode = _graph_mode(capture_meta)
    dup = api.height - api.select(pl.struct("global_pid", "correlation_id").n_unique()).item() if api.height else 0
    if dup:
        notes.append(f"{dup} CUDA API rows repeat a (process, correlationId) (old exports log runtime calls twice)")
    meta = TraceMeta(
        path=path,
        engine=src.engine,
        nsys_version=export_meta.get("EXPORT_PRODUCT_VERSION"),
        schema_version=export_meta.get("EXPORT_SCHEMA_VERSION"),
        graph_trace_mode=mode,
        graph_launches=graph_launches,
        graph_trace_rows=graph_trace_rows,
        duplicate_api_rows=dup,
        export=export_meta,
        capture=capture_meta,
        notes=tuple(notes),
    )
    if meta.graph_nodes_hidden:
        notes.append(
            f"CUDA graphs traced whole ({graph_trace_rows} graph launches as single records): kernels inside "
            "graphs are invisible; capture with --cuda-graph-trace=node to see them"
        )
        meta = TraceMeta(**{**meta.__dict__, "notes": tuple(notes)})
    return Trace(meta, gpu_ops, api, ranges, marks, strings, devices)
