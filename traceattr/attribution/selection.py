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
        if self.domain is not None:
            ranges = ranges.filter(pl.col("domain") == self.domain)
        if self.match is not None:
            ranges = ranges.filter(pl.col("name").str.contains(self.match).fill_null(False))
        return ranges

    @property
    def active(self) -> bool:
        return self.domain is not None or self.match is not None


def with_tree(ranges: pl.DataFrame, index: RangeIndex) -> pl.DataFrame:
    """*ranges* with ``parent_id, level, root_id``: columns added, not every column copied through a join."""
    return ranges.hstack(rows_at(index.tree(), "range_id", ranges["range_id"]).get_columns())


def usable_ranges(ranges: pl.DataFrame, select: RangeFilter) -> tuple[pl.DataFrame, int]:
    cross = pl.col("end_global_tid").is_not_null() & (pl.col("end_global_tid") != pl.col("global_tid"))
    dropped = ranges.filter(cross).height
    return select.apply(ranges.filter(~cross)), dropped
