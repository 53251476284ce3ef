"""Interval algebra on polars frames: same-thread containment and unions.

Containment is nsys's rule: ``outer.start <= inner.start`` and
``inner.end <= outer.end`` on the same thread, bounds inclusive. The thread
equality is folded into the coordinates (thread rank × span + time), so the
join is a pure two-inequality ``join_where`` (an IEJoin, O(n log n + output))
rather than a hash join on the thread followed by a per-thread cross product,
which is quadratic when one thread holds every call (the usual profile).
"""

from __future__ import annotations

import polars as pl

_MAX_KEY = 1 << 62


def _thread_keys(inner: pl.DataFrame, outer: pl.DataFrame, thread: str) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """Add ``_ks``/``_ke`` keys that order (thread, time) lexicographically."""
    both = pl.concat([inner.select(thread, "start", "end"), outer.select(thread, "start", "end")])
    t0 = both["start"].min()
    t1 = max(both["end"].max(), both["start"].max())
    span = int(t1 - t0) + 1
    threads = both.select(pl.col(thread).unique().sort()).with_row_index("_rank").with_columns(
        pl.col("_rank").cast(pl.Int64)
    )
    if threads.height * span >= _MAX_KEY:
        return None

    def keyed(df: pl.DataFrame) -> pl.DataFrame:
        return df.join(threads, on=thread, how="left").with_columns(
            (pl.col("_rank") * span + (pl.col("start") - t0)).alias("_ks"),
            (pl.col("_rank") * span + (pl.col("end") - t0)).alias("_ke"),
        )

    return keyed(inner), keyed(outer)


def contained_pairs(
    inner: pl.DataFrame, outer: pl.DataFrame, *, inner_id: str, outer_id: str, thread: str = "global_tid"
) -> pl.DataFrame:
    """All (inner_id, outer_id) with inner inside outer on the same thread.

    Both frames need ``start``, ``end`` and *thread*; ids must differ in name.
    """
    schema = {inner_id: inner.schema[inner_id], outer_id: outer.schema[outer_id]}
    inner = inner.filter(pl.col(thread).is_not_null())
    outer = outer.filter(pl.col(thread).is_not_null())
    if inner.height == 0 or outer.height == 0:
        return pl.DataFrame(schema=schema)
    keyed = _thread_keys(inner, outer, thread)
    if keyed is None:  # timestamps too far apart to fold: join thread by thread
        parts = [
            contained_pairs(
                inner.filter(pl.col(thread) == t), outer.filter(pl.col(thread) == t),
                inner_id=inner_id, outer_id=outer_id, thread=thread,
            )
            for t in outer[thread].unique().to_list()
        ]
        return pl.concat(parts) if parts else pl.DataFrame(schema=schema)
    ki, ko = keyed
    left = ki.select(pl.col(inner_id), pl.col("_ks").alias("_is"), pl.col("_ke").alias("_ie"))
    right = ko.select(pl.col(outer_id), pl.col("_ks").alias("_os"), pl.col("_ke").alias("_oe"))
    return left.join_where(right, pl.col("_is") >= pl.col("_os"), pl.col("_ie") <= pl.col("_oe")).select(
        inner_id, outer_id
    )


def union_length(df: pl.DataFrame, group: str, start: str = "start", end: str = "end") -> pl.DataFrame:
    """Per *group*, the total length covered by the union of its intervals.

    Sorted by start, an interval adds only what reaches past the furthest end
    seen before it in its group: ``max(0, end - max(start, prior max end))``.
    """
    prior_end = pl.col(end).cum_max().shift(1).over(group)
    return (
        df.select(group, start, end)
        .sort(group, start)
        .with_columns(
            (pl.col(end) - pl.max_horizontal(pl.col(start), prior_end.fill_null(pl.col(start))))
            .clip(lower_bound=0)
            .alias("_covered")
        )
        .group_by(group)
        .agg(pl.col("_covered").sum().alias("busy_ns"))
    )
