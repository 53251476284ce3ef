"""From a GPU op to the runtime call(s) that launched it, and from those to the NVTX ranges holding them."""

from __future__ import annotations

import polars as pl

from traceattr.attribution.intervals import RangeIndex
from traceattr.core.keys import first_of_id, rows_at
from traceattr.trace import schema as S


def launches_of(gpu_ops: pl.DataFrame, api: pl.DataFrame, *, repeated: bool = True) -> pl.DataFrame:
    """(op_id, api_id, api start/end, thread) for every runtime row of an op's launch.

    correlationId is unique per process only, so the join is on (process,
    correlationId). Old exports log a call twice (two rows, one correlationId):
    both rows are kept and an op is inside a range if either row is (nsys).
    Without *repeated* rows, one process's ops find their row by key lookup.
    """
    calls = api.select(
        S.global_pid_from_tid("global_tid").alias("global_pid"),
        "correlation_id",
        "api_id",
        pl.col("start").alias("api_start"),
        pl.col("end").alias("api_end"),
        "global_tid",
    )
    keys = ["global_pid", "correlation_id"]
    op_pids = gpu_ops["global_pid"].unique()
    one_process = False
    if op_pids.null_count() == op_pids.len():
        keys = ["correlation_id"]  # no process recorded on the ops: ids alone
    elif op_pids.len() == 1 and calls["global_pid"].unique().equals(op_pids):
        keys, one_process = ["correlation_id"], True  # the same join on a single integer key
    if one_process and not repeated:  # ids unique in the process: a lookup, not a hash join
        found = rows_at(calls.drop("global_pid"), "correlation_id", gpu_ops["correlation_id"])
        return gpu_ops.select("op_id").hstack(found.get_columns()).filter(pl.col("api_id").is_not_null())
    return (
        gpu_ops.select("op_id", *keys)
        .join(calls.drop("global_pid") if "global_pid" not in keys else calls, on=keys, how="inner")
        .select("op_id", "api_id", "api_start", "api_end", "global_tid")
    )


def locate(
    index: RangeIndex, launches: pl.DataFrame, *, dedupe: bool, ancestors: bool = True
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(op_id, range_id, api_start) for every holding range, and for the deepest one.

    An op launched by a call logged twice (old exports) can reach a range
    through either row; *dedupe* merges those, keeping the earlier call start.
    Without *ancestors* the first frame holds only the pairs of non-laminar
    threads (see :meth:`RangeIndex.locate`).
    """
    calls = launches.select(
        pl.col("api_id").alias("call_id"),
        "global_tid",
        pl.col("api_start").alias("start"),
        pl.col("api_end").alias("end"),
    )
    calls = calls.filter(first_of_id(calls["call_id"]))  # one row per call: its rows are alike
    every, deepest = index.locate(calls, ancestors=ancestors)
    out = []
    for located in (every, deepest):
        if located is deepest and not dedupe:  # one deepest range per call: a lookup by call
            found = rows_at(located, "call_id", launches["api_id"])
            pairs = launches.select("op_id", "api_start").hstack(found.get_columns())
            out.append(pairs.filter(pl.col("range_id").is_not_null()).select("op_id", "range_id", "api_start"))
            continue
        pairs = launches.select("op_id", pl.col("api_id").alias("call_id"), "api_start").join(
            located, on="call_id", how="inner"
        )
        if dedupe:
            pairs = pairs.group_by("op_id", "range_id").agg(pl.col("api_start").min())
        out.append(pairs.select("op_id", "range_id", "api_start"))
    return out[0], out[1]
