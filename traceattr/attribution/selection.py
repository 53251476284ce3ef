"""Which NVTX ranges take part (a domain/name filter, same-thread ranges only) and their nesting forest."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from traceattr.attribution.intervals import RangeIndex
from traceattr.core.keys import rows_at


@dataclass(frozen=True)
class RangeFilter:
    """Which ranges take part: by domain name and/or a regex on the full name."""

    domain: str | None = None
    match: str | None = None

    def apply(self, ranges: pl.DataFrame) -> pl.DataFrame:
        return ranges.filter(self.expr()) if self.active else ranges  # no filter: the frame, not a copy

    def expr(self) -> pl.Expr:
        """True on the rows (ranges, or range-table rows: ``domain``, ``name``) the filter chooses."""
        chosen = pl.lit(True)
        if self.domain is not None:
            chosen &= (pl.col("domain") == self.domain).fill_null(False)
        if self.match is not None:
            chosen &= pl.col("name").str.contains(self.match).fill_null(False)
        return chosen

    @property
    def active(self) -> bool:
        return self.domain is not None or self.match is not None


def with_tree(ranges: pl.DataFrame, index: RangeIndex) -> pl.DataFrame:
    """*ranges* with ``parent_id, level, root_id``: columns added, not every column copied through a join."""
    return ranges.hstack(rows_at(index.tree(), "range_id", ranges["range_id"]).get_columns())


def usable_ranges(ranges: pl.DataFrame, select: RangeFilter) -> tuple[pl.DataFrame, int]:
    cross = pl.col("end_global_tid").is_not_null() & (pl.col("end_global_tid") != pl.col("global_tid"))
    dropped = ranges.filter(cross).height
    # none dropped (most traces): the frame itself, not a copy held beside the trace's (sweep: 104 MB)
    return select.apply(ranges.filter(~cross) if dropped else ranges), dropped


def chosen_owner(
    placement: pl.DataFrame, ranges: pl.DataFrame, select: RangeFilter
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(*placement* with ``range_id`` each op's innermost *chosen* range: its own range or that range's nearest
    chosen ancestor, null in no chosen range; each chosen range's ``parent_id`` among the chosen ranges, the tree
    a call's subtree follows). One join per nesting level."""
    tree = with_tree(ranges, RangeIndex(ranges)).select("range_id", "parent_id", "level", select.expr().alias("_c"))
    owner = tree.filter(pl.col("level") == 0).select(
        "range_id", "parent_id", "_c", pl.when(pl.col("_c")).then(pl.col("range_id")).alias("_owner"),
        pl.lit(None, tree.schema["range_id"]).alias("_up"),
    )  # fmt: skip
    known = [owner]
    deepest = tree["level"].max()
    for level in range(1, int(deepest) + 1 if isinstance(deepest, int) else 1):
        here = tree.filter(pl.col("level") == level).join(
            owner.select(pl.col("range_id").alias("parent_id"), pl.col("_owner").alias("_up")),
            on="parent_id",
            how="left",
        )
        owner = here.select(
            "range_id", "parent_id", "_c", pl.when(pl.col("_c")).then(pl.col("range_id")).otherwise(pl.col("_up")).alias("_owner"),
            "_up",
        )  # fmt: skip
        known.append(owner)
    table = pl.concat(known)
    placed = placement.join(table.select("range_id", "_owner"), on="range_id", how="left", maintain_order="left")
    placed = placed.with_columns(pl.col("_owner").cast(placement.schema["range_id"]).alias("range_id")).drop("_owner")
    parents = table.filter(pl.col("_c")).select("range_id", pl.col("_up").alias("parent_id"))
    return placed, parents
