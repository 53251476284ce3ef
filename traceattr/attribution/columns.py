"""The attribution's vocabulary: the columns of its range and op tables, the two buckets' names."""

from __future__ import annotations

import polars as pl

from traceattr.attribution.roles import ROLES

UNATTRIBUTED = "[unattributed]"
NO_LAUNCH = "[no launch record]"
UNATTRIBUTED_ID = -1  # group keys of the two buckets while aggregating
NO_LAUNCH_ID = -2

ROLE_COLUMNS = tuple(f"{r}_sum_ns" for r in ROLES)  # op time summed per role: overlaps count twice
RANGE_COLUMNS = (
    "name", "domain", "message", "style", "pid", "tid", "range_id", "parent_id", "level", "num_child",
    "start_ns", "end_ns", "duration_ns", "closed",
    "gpu_start_ns", "gpu_end_ns", "gpu_span_ns", "gpu_ops", "op_records", "kernels",
    "kernel_sum_ns", "gpu_sum_ns", "busy_ns", "gap_ns", "launch_latency_ns", *ROLE_COLUMNS,
    "streams", "devices", "payload",
)  # fmt: skip
# what a timeline of calls (report) reads of the range table: the ranges of each call's subtree, placed in time
TIMELINE_COLUMNS = ("range_id", "parent_id", "level", "name", "duration_ns", "gpu_start_ns", "gpu_span_ns",
                    "launch_latency_ns", "gpu_ops")  # fmt: skip
OP_COLUMNS = (
    "op_id", "kind", "role", "family", "name", "short_name", "start_ns", "end_ns", "duration_ns",
    "device_id", "context_id", "stream_id", "pid", "tid", "correlation_id", "api_start_ns",
    "range_id", "range_name", "outer_range_id", "outer_range_name",
    "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread",
    "static_smem", "dynamic_smem", "bytes", "graph_node_id", "graph_id", "mangled_name",
)  # fmt: skip


METRICS_SCHEMA = {
    "range_id": pl.Int64, "gpu_start_ns": pl.Int64, "gpu_end_ns": pl.Int64, "gpu_ops": pl.Int64,
    "op_records": pl.Int64, "kernels": pl.Int64, "kernel_sum_ns": pl.Int64, "gpu_sum_ns": pl.Int64,
    "streams": pl.Int64, "devices": pl.Int64, "busy_ns": pl.Int64, **dict.fromkeys(ROLE_COLUMNS, pl.Int64),
    "gpu_span_ns": pl.Int64, "launch_latency_ns": pl.Int64, "gap_ns": pl.Int64,
}  # fmt: skip
