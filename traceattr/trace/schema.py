"""Facts about the nsys SQLite export schema (2.9.1 → 3.25.0) and the typed
frames traceattr builds from it. Constants only; no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from polars._typing import PolarsDataType  # a DataType or its class: schemas here hold classes (pl.Int64)

# NVTX_EVENTS.eventType (ENUM_NSYS_EVENT_TYPE)
NVTX_MARK = 34
NVTX_PUSHPOP = 59
NVTX_STARTEND = 60
NVTXT_PUSHPOP = 70  # NVTX emitted through the nvtxt text API
NVTXT_STARTEND = 71
NVTX_DOMAIN_CREATE = 75
RANGE_EVENT_TYPES = (NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND)
PUSHPOP_EVENT_TYPES = (NVTX_PUSHPOP, NVTXT_PUSHPOP)

# globalTid = <HW:8><VM:8><PID:24><TID:24>; kernels carry globalPid = globalTid with TID zeroed.
_TID_BITS = 24
_ID_MASK = 0xFFFFFF
GLOBAL_PID_MASK = ~_ID_MASK  # as a signed int64 mask: keeps HW, VM and PID


def pid_from_global(col: str | pl.Expr) -> pl.Expr:
    expr = pl.col(col) if isinstance(col, str) else col
    return ((expr // (1 << _TID_BITS)) & _ID_MASK).cast(pl.Int64)  # floor division = arithmetic shift


def tid_from_global(col: str | pl.Expr) -> pl.Expr:
    expr = pl.col(col) if isinstance(col, str) else col
    return (expr & _ID_MASK).cast(pl.Int64)


def global_pid_from_tid(col: str | pl.Expr) -> pl.Expr:
    expr = pl.col(col) if isinstance(col, str) else col
    return (expr & GLOBAL_PID_MASK).cast(pl.Int64)


# Tables (the first name found wins where a table was renamed between versions).
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
GRAPH_TRACE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"
STRINGS = "StringIds"
GPU_INFO = "TARGET_INFO_GPU"
EXPORT_META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")
CAPTURE_META = "META_DATA_CAPTURE"
COPY_KIND_ENUM = "ENUM_CUDA_MEMCPY_OPER"

# Every table the loader reads: an export of only these (``nsys export --tables``) loads the same trace.
LOADER_TABLES = (
    STRINGS,
    KERNEL,
    MEMCPY,
    MEMSET,
    GRAPH_TRACE,
    RUNTIME,
    NVTX,
    GPU_INFO,
    *EXPORT_META_TABLES,
    CAPTURE_META,
)

# GPU operation kinds, in the order they are unioned.
OP_KINDS = ("kernel", "memcpy", "memset", "graph")
OpKind = pl.Enum(list(OP_KINDS))
RangeStyle = pl.Enum(["PushPop", "StartEnd"])

# Narrow types where values are small (dims, registers, string ids): a trace
# of millions of ops must fit in a few times its file size.
GPU_OPS_SCHEMA: dict[str, PolarsDataType] = {
    "op_id": pl.Int64,  # row number in the union, stable across runs
    "kind": OpKind,
    "start": pl.Int64,
    "end": pl.Int64,
    "device_id": pl.Int32,
    "context_id": pl.Int32,
    "stream_id": pl.Int32,
    "correlation_id": pl.Int64,
    "global_pid": pl.Int64,
    "name_id": pl.Int32,  # StringIds id of demangledName (kernels only)
    "short_name_id": pl.Int32,
    "mangled_name_id": pl.Int32,
    "grid_x": pl.Int32,
    "grid_y": pl.Int32,
    "grid_z": pl.Int32,
    "block_x": pl.Int32,
    "block_y": pl.Int32,
    "block_z": pl.Int32,
    "registers_per_thread": pl.Int32,
    "static_smem": pl.Int32,
    "dynamic_smem": pl.Int32,
    "bytes": pl.Int64,  # memcpy / memset only
    "copy_kind": pl.Int32,  # memcpy only (ENUM_CUDA_MEMCPY_OPER)
    "graph_node_id": pl.Int64,
    "graph_id": pl.Int32,
}

API_SCHEMA: dict[str, PolarsDataType] = {
    "api_id": pl.Int64,
    "start": pl.Int64,
    "end": pl.Int64,
    "global_tid": pl.Int64,
    "correlation_id": pl.Int64,
    "name_id": pl.Int32,
}

RANGES_SCHEMA: dict[str, PolarsDataType] = {
    "range_id": pl.Int64,  # NVTX_EVENTS rowid, as nsys's RangeId
    "style": RangeStyle,
    "start": pl.Int64,
    "end": pl.Int64,  # an unclosed range ends at the last NVTX timestamp (nsys)
    "closed": pl.Boolean,
    "global_tid": pl.Int64,
    "pid": pl.Int32,
    "tid": pl.Int32,
    "end_global_tid": pl.Int64,  # set when a start/end range ended on another thread
    "domain_id": pl.Int32,
    "domain": pl.String,
    "message": pl.String,
    "name": pl.String,  # as nsys displays it: "domain:message", or message
    "payload": pl.Int64,
}

MARKS_SCHEMA: dict[str, PolarsDataType] = {
    "mark_id": pl.Int64,
    "time": pl.Int64,
    "global_tid": pl.Int64,
    "pid": pl.Int32,
    "tid": pl.Int32,
    "domain": pl.String,
    "name": pl.String,
}

DEVICES_SCHEMA: dict[str, PolarsDataType] = {
    "device_id": pl.Int64,
    "name": pl.String,
    "chip": pl.String,
    "sm_count": pl.Int64,
    "l2_bytes": pl.Int64,
    "memory_bytes": pl.Int64,
    "memory_bandwidth": pl.Int64,  # bytes/s as nsys reports it
    "clock_hz": pl.Int64,
    "cc_major": pl.Int64,
    "cc_minor": pl.Int64,
    "bus": pl.String,
}

# CUpti_ActivityMemcpyKind labels, as nsys names memcpy rows: "[CUDA memcpy <label>]".
MEMCPY_LABELS = {
    0: "Unknown",
    1: "Host-to-Device",
    2: "Device-to-Host",
    3: "Host-to-Array",
    4: "Array-to-Host",
    5: "Array-to-Array",
    6: "Array-to-Device",
    7: "Device-to-Array",
    8: "Device-to-Device",
    9: "Host-to-Host",
    10: "Peer-to-Peer",
    11: "Unified Host-to-Device",
    12: "Unified Device-to-Host",
    13: "Unified Device-to-Device",
}

# -- what is read from the export: {our column: nsys column} per table; a column a table lacks reads as NULL
OP_SOURCES: dict[str, tuple[str, dict[str, str]]] = {
    # table: (kind, {our column: nsys column})
    KERNEL: ("kernel", {
        "start": "start", "end": "end", "device_id": "deviceId", "context_id": "contextId",
        "stream_id": "streamId", "correlation_id": "correlationId", "global_pid": "globalPid",
        "name_id": "demangledName", "short_name_id": "shortName", "mangled_name_id": "mangledName",
        "grid_x": "gridX", "grid_y": "gridY", "grid_z": "gridZ",
        "block_x": "blockX", "block_y": "blockY", "block_z": "blockZ",
        "registers_per_thread": "registersPerThread", "static_smem": "staticSharedMemory",
        "dynamic_smem": "dynamicSharedMemory", "graph_node_id": "graphNodeId", "graph_id": "graphId",
    }),
    MEMCPY: ("memcpy", {
        "start": "start", "end": "end", "device_id": "deviceId", "context_id": "contextId",
        "stream_id": "streamId", "correlation_id": "correlationId", "global_pid": "globalPid",
        "bytes": "bytes", "copy_kind": "copyKind", "graph_node_id": "graphNodeId",
    }),
    MEMSET: ("memset", {
        "start": "start", "end": "end", "device_id": "deviceId", "context_id": "contextId",
        "stream_id": "streamId", "correlation_id": "correlationId", "global_pid": "globalPid",
        "bytes": "bytes", "graph_node_id": "graphNodeId",
    }),
    GRAPH_TRACE: ("graph", {
        "start": "start", "end": "end", "device_id": "deviceId", "context_id": "contextId",
        "stream_id": "streamId", "correlation_id": "correlationId", "global_pid": "globalPid",
        "graph_id": "graphId",
    }),
}  # fmt: skip
OP_READ_SCHEMA = {k: v for k, v in GPU_OPS_SCHEMA.items() if k not in ("op_id", "kind")}
# a kernel's launch configuration: what only the per-op table shows (attribute's kernels, a report's timeline), so
# a command that shows no op (compare) reads none of it (``load_trace(launch_config=False)``: NULL columns)
LAUNCH_CONFIG = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread",
                 "static_smem", "dynamic_smem")  # fmt: skip


def op_columns(table: str, launch_config: bool = True) -> dict[str, str]:
    """{our column: nsys column} read from op *table*, without the :data:`LAUNCH_CONFIG` unless *launch_config*."""
    columns = OP_SOURCES[table][1]
    return columns if launch_config else {k: v for k, v in columns.items() if k not in LAUNCH_CONFIG}


API_COLUMNS = {
    "start": "start", "end": "end", "global_tid": "globalTid", "correlation_id": "correlationId", "name_id": "nameId",
}  # fmt: skip
API_READ_SCHEMA = {k: v for k, v in API_SCHEMA.items() if k != "api_id"}

STRINGS_READ_SCHEMA: dict[str, PolarsDataType] = {"id": pl.Int64, "value": pl.String}

# NVTX_EVENTS as read, before labelling: ids are the table's rowids (nsys numbers them densely from 1)
NVTX_PAYLOAD_COLUMNS = ("int64Value", "uint64Value", "int32Value", "uint32Value")  # the first set one is the payload
NVTX_RANGE_READ_SCHEMA: dict[str, PolarsDataType] = {
    "range_id": pl.Int64, "event_type": pl.Int32, "start": pl.Int64, "end": pl.Int64, "global_tid": pl.Int64,
    "end_global_tid": pl.Int64, "text_id": pl.Int64, "domain_id": pl.Int32, "payload": pl.Int64,
}  # fmt: skip
NVTX_RANGE_COLUMNS = {  # the read columns taken as they are (event_type, range_id and payload are derived)
    "start": "start", "end": "end", "global_tid": "globalTid", "end_global_tid": "endGlobalTid",
    "text_id": "textId", "domain_id": "domainId",
}  # fmt: skip
NVTX_MARK_READ_SCHEMA: dict[str, PolarsDataType] = {
    "mark_id": pl.Int64, "time": pl.Int64, "global_tid": pl.Int64, "text_id": pl.Int64, "domain_id": pl.Int32,
}  # fmt: skip
NVTX_DOMAIN_READ_SCHEMA: dict[str, PolarsDataType] = {
    "row": pl.Int64, "start": pl.Int64, "global_tid": pl.Int64, "domain_id": pl.Int32,
}  # fmt: skip
NVTX_TEXT_READ_SCHEMA: dict[str, PolarsDataType] = {"row": pl.Int64, "text": pl.String}
NVTX_TEXT_EVENT_TYPES = (*RANGE_EVENT_TYPES, NVTX_MARK, NVTX_DOMAIN_CREATE)  # rows whose inline text is read
