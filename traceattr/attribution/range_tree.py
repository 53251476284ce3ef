"""Parent and nesting level of NVTX ranges, by nsys's rule.

A range's parent is the tightest other range on the same thread that
contains it (smallest ``(child.start - parent.start) + (parent.end -
child.end)``); level 0 has no parent. nsys leaves ties to SQLite's scan
order and turns identical intervals into a parent cycle (both drop out of
its tree); traceattr breaks ties deterministically instead: of identical
intervals the lower range_id is the outer one, and among equally tight
candidates the higher range_id (the inner one of such a chain) wins.
"""

from __future__ import annotations

import polars as pl

from traceattr.attribution.intervals import contained_pairs


def range_tree(ranges: pl.DataFrame) -> pl.DataFrame:
    """``range_id, parent_id, level`` for every range in *ranges*.

    *ranges* needs ``range_id, global_tid, start, end``.
    """
    base = ranges.select("range_id", "global_tid", "start", "end")
    pairs = contained_pairs(
        base.rename({"range_id": "child_id"}), base.rename({"range_id": "parent_id"}),
        inner_id="child_id", outer_id="parent_id",
    )
    bounds = base.select("range_id", "start", "end")
    parents = (
        pairs.filter(pl.col("child_id") != pl.col("parent_id"))
        .join(bounds.rename({"range_id": "child_id", "start": "cs", "end": "ce"}), on="child_id")
        .join(bounds.rename({"range_id": "parent_id", "start": "ps", "end": "pe"}), on="parent_id")
        .filter(~((pl.col("cs") == pl.col("ps")) & (pl.col("ce") == pl.col("pe")) & (pl.col("parent_id") > pl.col("child_id"))))
        .with_columns(((pl.col("cs") - pl.col("ps")) + (pl.col("pe") - pl.col("ce"))).alias("tightness"))
        .sort("child_id", "tightness", "parent_id", descending=[False, False, True])
        .unique("child_id", keep="first")
        .select("child_id", "parent_id")
    )
    tree = base.select("range_id").join(parents.rename({"child_id": "range_id"}), on="range_id", how="left")
    return tree.join(_levels(tree), on="range_id", how="left")


def _levels(tree: pl.DataFrame) -> pl.DataFrame:
    """Depth of each node by pointer doubling: O(log depth) joins, not O(depth)."""
    state = tree.select(
        "range_id",
        pl.col("parent_id").alias("jump"),
        pl.when(pl.col("parent_id").is_null()).then(0).otherwise(1).cast(pl.Int64).alias("hops"),
    )
    for _ in range(64):  # 2**64 levels: a loop past this means a parent cycle
        if state["jump"].is_null().all():
            break
        ahead = state.select(pl.col("range_id").alias("jump"), pl.col("jump").alias("next"), pl.col("hops").alias("more"))
        state = (
            state.join(ahead, on="jump", how="left")
            .select(
                "range_id",
                pl.col("next").alias("jump"),
                (pl.col("hops") + pl.col("more").fill_null(0)).alias("hops"),
            )
        )
    else:
        raise AssertionError("NVTX range parents form a cycle")
    return state.select("range_id", pl.col("hops").alias("level"))
