"""Attribute GPU operations to NVTX ranges (pure polars; no torch, no I/O).

nsys's rule: a GPU op belongs to a range when the CUDA API call that
launched it lies inside the range on the same thread. In ``nsys`` mode every
enclosing range gets the op (nested ranges overlap, as in ``nsys stats -r
nvtx_gpu_proj_trace``); in ``innermost`` mode each op counts once, in the
deepest enclosing range. Ops launched outside every range form the
``[unattributed]`` bucket; ops whose launch call is not in the trace (a
sliced capture) form ``[no launch record]``, which nsys silently omits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import polars as pl

from traceattr.attribution.intervals import contained_pairs, union_length
from traceattr.attribution.range_tree import range_tree
from traceattr.attribution.roles import ROLES, RoleEnum, RoleRules
from traceattr.trace.loader import Trace, TraceMeta
from traceattr.trace.schema import MEMCPY_LABELS

Mode = Literal["nsys", "innermost"]
MODES: tuple[str, ...] = get_args(Mode)
UNATTRIBUTED = "[unattributed]"
NO_LAUNCH = "[no launch record]"
_UNATTRIBUTED_ID = -1  # group keys of the two buckets while aggregating
_NO_LAUNCH_ID = -2

ROLE_COLUMNS = tuple(f"{r}_ns" for r in ROLES)
RANGE_COLUMNS = (
    "name", "domain", "message", "style", "pid", "tid", "range_id", "parent_id", "level", "num_child",
    "start_ns", "end_ns", "duration_ns", "closed",
    "gpu_start_ns", "gpu_end_ns", "gpu_span_ns", "gpu_ops", "op_records", "kernels",
    "kernel_sum_ns", "gpu_sum_ns", "busy_ns", "gap_ns", "launch_latency_ns", *ROLE_COLUMNS,
    "streams", "devices", "payload",
)  # fmt: skip
OP_COLUMNS = (
    "op_id", "kind", "role", "family", "name", "short_name", "start_ns", "end_ns", "duration_ns",
    "device_id", "context_id", "stream_id", "pid", "tid", "correlation_id", "api_start_ns",
    "range_id", "range_name", "outer_range_id", "outer_range_name",
    "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread",
    "static_smem", "dynamic_smem", "bytes", "graph_node_id", "graph_id", "mangled_name",
)  # fmt: skip


@dataclass(frozen=True)
class RangeFilter:
    """Which ranges take part: by domain name and/or a regex on the full name."""

    domain: str | None = None
    match: str | None = None

    def apply(self, ranges: pl.DataFrame) -> pl.DataFrame:
        if self.domain is not None:
            ranges = ranges.filter(pl.col("domain") == self.domain)
        if self.match is not None:
            ranges = ranges.filter(pl.col("name").str.contains(self.match).fill_null(False))
        return ranges


@dataclass(frozen=True)
class Attribution:
    """The answer: one row per range (plus buckets) and one row per GPU op."""

    ranges: pl.DataFrame
    ops: pl.DataFrame
    mode: str
    meta: TraceMeta
    notes: tuple[str, ...]


def attribute(
    trace: Trace,
    mode: Mode = "nsys",
    rules: RoleRules | None = None,
    select: RangeFilter | None = None,
) -> Attribution:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
    rules = rules or RoleRules.default()
    notes = list(trace.meta.notes)

    ranges, dropped = _usable_ranges(trace.ranges, select or RangeFilter())
    if dropped:
        notes.append(f"{dropped} start/end ranges ended on another thread: not projected (nsys drops them too)")
    tree = range_tree(ranges)
    ranges = ranges.join(tree, on="range_id", how="left")

    launches = _launches(trace.gpu_ops, trace.api)
    pairs = _op_range_pairs(launches, ranges)
    ops = _op_table(trace, launches, pairs, ranges, rules)
    orphans = ops.filter(pl.col("api_start_ns").is_null()).height
    if orphans:
        notes.append(f"{orphans} GPU ops have no launch record in the trace (sliced capture): listed as {NO_LAUNCH}")

    if mode == "nsys":
        assign = pairs
    else:
        assign = ops.filter(pl.col("range_id").is_not_null()).select(
            "op_id", "range_id", pl.col("api_start_ns").alias("api_start")
        )
    buckets = ops.filter(pl.col("range_id").is_null()).select(
        "op_id",
        pl.when(pl.col("api_start_ns").is_null())
        .then(pl.lit(_NO_LAUNCH_ID, pl.Int64))
        .otherwise(pl.lit(_UNATTRIBUTED_ID, pl.Int64))
        .alias("range_id"),
        pl.col("api_start_ns").alias("api_start"),
    )
    metrics = _metrics(pl.concat([assign, buckets]), ops)
    table = _range_table(ranges, metrics, mode)
    return Attribution(table, ops.select(OP_COLUMNS).sort("start_ns", "op_id"), mode, trace.meta, tuple(notes))


def _usable_ranges(ranges: pl.DataFrame, select: RangeFilter) -> tuple[pl.DataFrame, int]:
    cross = pl.col("end_global_tid").is_not_null() & (pl.col("end_global_tid") != pl.col("global_tid"))
    dropped = ranges.filter(cross).height
    return select.apply(ranges.filter(~cross)), dropped


def _launches(gpu_ops: pl.DataFrame, api: pl.DataFrame) -> pl.DataFrame:
    """(op_id, api_id, api start/end, thread) for every runtime row of an op's launch.

    correlationId is unique per process only, so the join is on (process,
    correlationId). Old exports log a call twice (two rows, one correlationId):
    both rows are kept and an op is inside a range if either row is (nsys).
    """
    keys = ["global_pid", "correlation_id"]
    if gpu_ops.height and gpu_ops["global_pid"].null_count() == gpu_ops.height:
        keys = ["correlation_id"]
    calls = api.select(
        *keys, "api_id", pl.col("start").alias("api_start"), pl.col("end").alias("api_end"), "global_tid", "tid"
    )
    return gpu_ops.select("op_id", *keys).join(calls, on=keys, how="inner").drop(keys)


def _op_range_pairs(launches: pl.DataFrame, ranges: pl.DataFrame) -> pl.DataFrame:
    """(op_id, range_id, api_start): every range holding an op's launch call."""
    calls = launches.select("api_id", "global_tid", pl.col("api_start").alias("start"), pl.col("api_end").alias("end"))
    calls = calls.unique("api_id")
    inside = contained_pairs(
        calls, ranges.select("range_id", "global_tid", "start", "end"), inner_id="api_id", outer_id="range_id"
    )
    return (
        launches.select("op_id", "api_id", "api_start")
        .join(inside, on="api_id", how="inner")
        .group_by("op_id", "range_id")
        .agg(pl.col("api_start").min())
    )


def _names(trace: Trace, gpu_ops: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Give each distinct op identity a ``name_key`` and resolve its names once."""
    ident = ["kind", "name_id", "short_name_id", "mangled_name_id", "copy_kind", "graph_id"]
    names = gpu_ops.select(ident).unique().sort(ident, nulls_last=True).with_row_index("name_key")
    names = names.with_columns(pl.col("name_key").cast(pl.Int64))
    strings = trace.strings
    for col, out in (("name_id", "name"), ("short_name_id", "short_name"), ("mangled_name_id", "mangled_name")):
        names = names.join(strings.rename({"id": col, "value": out}), on=col, how="left")
    labels = pl.DataFrame(
        {"copy_kind": list(MEMCPY_LABELS), "_label": list(MEMCPY_LABELS.values())},
        schema={"copy_kind": pl.Int64, "_label": pl.String},
    )
    names = names.join(labels, on="copy_kind", how="left").with_columns(
        pl.when(pl.col("kind") == "memcpy")
        .then(pl.lit("[CUDA memcpy ") + pl.col("_label").fill_null("Unknown") + pl.lit("]"))
        .when(pl.col("kind") == "memset")
        .then(pl.lit("[CUDA memset]"))
        .when(pl.col("kind") == "graph")
        .then(pl.lit("[CUDA graph ") + pl.col("graph_id").cast(pl.String).fill_null("?") + pl.lit("]"))
        .otherwise(pl.col("name"))
        .alias("name")
    )
    keyed = gpu_ops.join(names.select("name_key", *ident), on=ident, how="left", nulls_equal=True)
    return keyed, names.select("name_key", "kind", "name", "short_name", "mangled_name")


def _op_table(
    trace: Trace, launches: pl.DataFrame, pairs: pl.DataFrame, ranges: pl.DataFrame, rules: RoleRules
) -> pl.DataFrame:
    """One row per GPU op: names, role, launch call and its innermost/outermost range."""
    depth = ranges.select("range_id", "level", pl.col("name").alias("range_name"))
    placed = pairs.join(depth, on="range_id", how="left")
    inner = placed.sort("op_id", "level", "range_id", descending=[False, True, True]).unique("op_id", keep="first")
    outer = placed.sort("op_id", "level", "range_id").unique("op_id", keep="first")
    # The launch row shown per op: the innermost of duplicated runtime rows (latest start).
    launch = launches.sort("op_id", "api_start", descending=[False, True]).unique("op_id", keep="first")
    ops, names = _names(trace, trace.gpu_ops)
    ops = (
        ops.join(launch.select("op_id", pl.col("api_start").alias("api_start_ns"), "tid"), on="op_id", how="left")
        .join(inner.select("op_id", "range_id", "range_name"), on="op_id", how="left")
        .join(
            outer.select("op_id", pl.col("range_id").alias("outer_range_id"), pl.col("range_name").alias("outer_range_name")),
            on="op_id",
            how="left",
        )
    )
    ops = rules.classify(ops, names, depth.select("range_id", "range_name"))
    return ops.join(names.select("name_key", "name", "short_name", "mangled_name"), on="name_key", how="left").with_columns(
        pl.col("start").alias("start_ns"),
        pl.col("end").alias("end_ns"),
        (pl.col("end") - pl.col("start")).alias("duration_ns"),
    )


def _metrics(assign: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """Per range_id: projection, op counts, kernel/busy/gap time, latency, role sums."""
    rows = assign.join(
        ops.select("op_id", "kind", "role", "start_ns", "end_ns", "duration_ns", "correlation_id", "pid", "stream_id", "device_id"),
        on="op_id",
        how="inner",
    )
    is_kernel = pl.col("kind") == "kernel"
    role_sums = [
        pl.col("duration_ns").filter(pl.col("role") == role).sum().alias(f"{role}_ns") for role in ROLES
    ]
    agg = rows.group_by("range_id").agg(
        pl.col("start_ns").min().alias("gpu_start_ns"),
        pl.col("end_ns").max().alias("gpu_end_ns"),
        # nsys's NumGPUOps counts launch calls: a graph launch with 5 kernels is 1
        pl.struct("pid", "correlation_id").n_unique().alias("gpu_ops"),
        pl.len().alias("op_records"),
        is_kernel.sum().alias("kernels"),
        pl.col("duration_ns").filter(is_kernel).sum().alias("kernel_sum_ns"),
        pl.col("duration_ns").sum().alias("gpu_sum_ns"),
        pl.col("api_start").min().alias("_first_api"),
        *role_sums,
        pl.struct("device_id", "stream_id").n_unique().alias("streams"),
        pl.col("device_id").n_unique().alias("devices"),
    )
    busy = union_length(rows.select("range_id", pl.col("start_ns").alias("start"), pl.col("end_ns").alias("end")), "range_id")
    return (
        agg.join(busy, on="range_id", how="left")
        .with_columns((pl.col("gpu_end_ns") - pl.col("gpu_start_ns")).alias("gpu_span_ns"))
        .with_columns(
            (pl.col("gpu_span_ns") - pl.col("busy_ns")).alias("gap_ns"),
            (pl.col("gpu_start_ns") - pl.col("_first_api")).alias("launch_latency_ns"),
        )
        .drop("_first_api")
    )


def _range_table(ranges: pl.DataFrame, metrics: pl.DataFrame, mode: str) -> pl.DataFrame:
    has_ops = metrics.filter(pl.col("range_id") >= 0).select("range_id")
    # nsys's NumChild counts children that have GPU ops themselves
    children = (
        ranges.join(has_ops, on="range_id", how="semi")
        .group_by("parent_id")
        .agg(pl.len().cast(pl.Int64).alias("num_child"))
        .rename({"parent_id": "range_id"})
    )
    base = ranges.select(
        "name", "domain", "message", "style", "pid", "tid", "range_id", "parent_id", "level",
        pl.col("start").alias("start_ns"), pl.col("end").alias("end_ns"),
        (pl.col("end") - pl.col("start")).alias("duration_ns"), "closed", "payload",
    ).join(children, on="range_id", how="left")  # fmt: skip
    named = base.join(metrics, on="range_id", how="left")
    bucket_rows = metrics.filter(pl.col("range_id") < 0).with_columns(
        pl.when(pl.col("range_id") == _NO_LAUNCH_ID).then(pl.lit(NO_LAUNCH)).otherwise(pl.lit(UNATTRIBUTED)).alias("name"),
        pl.col("range_id").alias("_bucket"),
        pl.lit(None, pl.Int64).alias("range_id"),
    )
    table = pl.concat([named.with_columns(pl.lit(0, pl.Int64).alias("_bucket")), bucket_rows], how="diagonal_relaxed")
    counts = ["gpu_ops", "op_records", "kernels", "num_child", "streams", "devices"]
    sums = ["kernel_sum_ns", "gpu_sum_ns", "busy_ns", *ROLE_COLUMNS]
    table = table.with_columns([pl.col(c).fill_null(0) for c in counts + sums])
    return (
        table.sort(["_bucket", "gpu_start_ns", "start_ns", "range_id"], descending=[True, False, False, False], nulls_last=True)
        .select(RANGE_COLUMNS)
        .with_columns(pl.col("style").cast(pl.String))
    )


__all__ = ["MODES", "NO_LAUNCH", "ROLE_COLUMNS", "UNATTRIBUTED", "Attribution", "Mode", "RangeFilter", "attribute", "RoleEnum"]
