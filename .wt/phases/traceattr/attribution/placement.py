"""Per op: its role, innermost range and that range's root, launching thread and call start."""

from __future__ import annotations

import polars as pl

from traceattr.attribution.roles import RoleDecider
from traceattr.core.keys import rows_at, scatter_rows
from traceattr.trace import schema as S


def _innermost(deepest: pl.DataFrame, ranges: pl.DataFrame) -> pl.DataFrame:
    """(op_id, range_id, …, level, root_id): one innermost range per op."""
    inner = deepest.hstack(rows_at(ranges.select("range_id", "level", "root_id"), "range_id", deepest["range_id"]))
    if inner.height != inner["op_id"].n_unique():  # a call logged twice can reach two ranges
        inner = inner.sort("op_id", "level", "range_id", descending=[False, True, True]).unique("op_id", keep="first")
    return inner


def placement_of(
    keys: pl.DataFrame,
    launches: pl.DataFrame,
    deepest: pl.DataFrame,
    ranges: pl.DataFrame,
    roles: RoleDecider,
    roles_from: tuple[pl.DataFrame, pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """Per op: role, family, innermost range and its root, launching thread and call start.

    *roles_from*: (deepest, ranges) of the whole trace when *ranges* is a selection: roles use those.
    """
    inner = _innermost(deepest, ranges)
    # The launch row shown per op: the innermost of duplicated runtime rows (latest start).
    launch = launches.select("op_id", "api_start", "global_tid")
    if launch.height != launch["op_id"].n_unique():
        launch = launch.sort("op_id", "api_start", descending=[False, True]).unique("op_id", keep="first")
    # keys is in op_id order with op_id == row: the other per-op frames are scattered to their rows
    n = keys.height
    placed = keys.hstack(
        [
            *scatter_rows(launch.select("op_id", pl.col("api_start").alias("api_start_ns"),
                                        S.tid_from_global("global_tid").cast(pl.Int32).alias("tid")), "op_id", n),
            *scatter_rows(inner.select("op_id", "range_id", pl.col("root_id").alias("outer_range_id")), "op_id", n),
        ]
    )  # fmt: skip
    if roles_from is None:
        classified = roles.classify(placed, ranges.select("range_id", pl.col("name").alias("range_name")))
    else:
        full_deepest, full_ranges = roles_from
        whole = placed.select("op_id", "name_key").hstack(
            scatter_rows(_innermost(full_deepest, full_ranges).select("op_id", "range_id"), "op_id", n)
        )
        decided = roles.classify(whole, full_ranges.select("range_id", pl.col("name").alias("range_name")))
        classified = placed.hstack(decided.select("role", "family"))
    return classified  # op_id order, one row per op: Attribution.ops_lazy gathers by position
