"""Rows by integer key without a hash join (pure polars).

The ids of a trace (nsys's string ids) and of the attribution (op_id,
range_id, name_key) are unique integer keys, most of them row numbers: looking rows up by binary search over sorted keys,
or scattering them to their row, gathers columns (string columns as views)
instead of building a hash table and copying every column through a join.
"""

from __future__ import annotations

import polars as pl


def group_numbers(frame: pl.DataFrame, keys: tuple[str, str], name: str = "_g") -> tuple[pl.DataFrame, pl.Series]:
    """Each row's pair of text *keys* (a call's shape and backend) as one number (*name*, u64: the two values'
    categorical codes side by side; a null is a code of its own), and the distinct pairs in the order first seen
    with their numbers. polars groups by two text keys (``group_by``, ``over``, ``unique``) through its general
    path, which encodes every row's keys: a median over the sweep's 500 k calls held ~40 MB that way, ~2 MB by
    the number; the number itself costs what its column does (a hash of the distinct values, not of the rows)."""

    def code(key: str) -> pl.Expr:
        return pl.col(key).cast(pl.Categorical).to_physical().cast(pl.UInt64).fill_null(_NULL_CODE)

    first, second = keys
    number = frame.select((code(first) * (1 << 32) + code(second)).alias(name)).to_series()
    distinct = frame.select(keys).with_columns(number).unique(subset=name, maintain_order=True)
    return distinct, number


_NULL_CODE = (1 << 32) - 1  # a null's code in group_numbers: a categorical's codes are u32, and never reach it


def gather_by_key(keys: pl.Series, values: pl.Series, ids: pl.Series) -> pl.Series:
    """``values`` at the row whose *keys* equals each of *ids* (null where none)."""
    return rows_at(pl.DataFrame([keys.alias("_key"), values]), "_key", ids).to_series()


def rows_at(frame: pl.DataFrame, key: str, ids: pl.Series) -> pl.DataFrame:
    """*frame*'s other columns at the row whose unique *key* equals each of *ids*, in the order of
    *ids*; nulls where no row has it."""
    return KeyIndex(frame, key).rows(ids)


class KeyIndex:
    """*frame*'s rows by its unique integer *key*, indexed once for many lookups (:func:`rows_at` is one
    lookup; a writer building a table slice by slice asks once per slice)."""

    def __init__(self, frame: pl.DataFrame, key: str) -> None:
        if frame[key].null_count():
            frame = frame.filter(pl.col(key).is_not_null())
        keys, rest = frame[key], frame.drop(key)
        self._slots: pl.Series | None = None
        self._lo = self._hi = 0
        self._way = "none" if keys.len() == 0 else "search"
        if keys.len():
            lo, hi = int(keys.min()), int(keys.max())  # type: ignore[arg-type]
            self._lo, self._hi = lo, hi
            if hi - lo + 1 == keys.len() and keys.is_sorted():  # keys are lo, lo + 1, …: the offset is the row
                self._way = "offset"
            elif hi - lo < 4 * keys.len() + 1024:  # dense keys (row ids): a position table, no sort, no search
                self._way = "slots"
                self._slots = pl.repeat(None, hi - lo + 1, dtype=pl.Int64, eager=True)
                self._slots.scatter(keys.cast(pl.Int64) - lo, pl.int_range(keys.len(), dtype=pl.Int64, eager=True))
            elif not keys.is_sorted():
                order = keys.arg_sort()
                keys, rest = keys.gather(order), rest[order]
        self._keys, self._rest = keys, rest

    def rows(self, ids: pl.Series) -> pl.DataFrame:
        """The other columns at each of *ids*' rows, in the order of *ids*; nulls where no row has it."""
        keys, rest = self._keys, self._rest
        if self._way == "none":
            return pl.DataFrame({c: pl.repeat(None, ids.len(), dtype=t, eager=True) for c, t in rest.schema.items()})
        if ids.len() == keys.len() and ids.null_count() == 0 and ids.cast(pl.Int64).equals(keys.cast(pl.Int64)):
            return rest  # asked in the frame's own order (a per-range frame for its ranges): no gather
        lo, hi = self._lo, self._hi
        if self._way == "offset" and ids.len() and not ids.null_count() and lo <= ids.min() and ids.max() <= hi:  # type: ignore[operator]
            return rest[ids if lo == 0 else ids - lo]  # every id found (string ids of names): no masks to build
        if self._way == "offset":
            off = ids.cast(pl.Int64) - lo
            found = ((off >= 0) & (off <= hi - lo)).fill_null(False)
            pos = off.set(~found, 0).fill_null(0)
        elif self._slots is not None:
            off = ids.cast(pl.Int64) - lo
            inside = ((off >= 0) & (off <= hi - lo)).fill_null(False)
            pos = self._slots.gather(off.set(~inside, 0).fill_null(0))
            found = inside & pos.is_not_null()
            pos = pos.fill_null(0)
        else:
            pos = keys.search_sorted(ids.fill_null(keys[0])).clip(upper_bound=keys.len() - 1)
            found = (keys.gather(pos) == ids).fill_null(False)
        out = rest[pos]
        if found.all():
            return out
        return out.select(pl.when(found).then(pl.col(c)).alias(c) for c in out.columns)


def scatter_rows(frame: pl.DataFrame, key: str, height: int) -> pl.DataFrame:
    """*frame*'s other columns placed at row *key* (unique, 0 <= key < height) of a *height*-row
    frame; nulls in rows no key names. For keys that are row numbers: no sort, no hash."""
    at = frame[key]
    if at.len() == height and (
        height == 0 or (at.null_count() == 0 and at[0] == 0 and at[-1] == height - 1 and at.is_sorted())
    ):
        return frame.drop(key)  # every row, in place already (ops that all have a launch): nothing to move
    return pl.DataFrame(
        [pl.repeat(None, height, dtype=frame.schema[c], eager=True).scatter(at, frame[c]).alias(c)
         for c in frame.columns if c != key]
    )  # fmt: skip


def first_of_id(ids: pl.Series) -> pl.Series:
    """Whether each row is the first (in row order) holding its integer id: ``is_first_distinct``
    without a hash table, which for millions of distinct ids costs random memory accesses per row.

    Ids in order (correlation ids of ops read in launch order) are runs: the first of each run. Else
    one sort of ``id × n + row`` (rows of one id in row order, so a run's first is the id's first row).
    """
    n = ids.len()
    if n == 0 or ids.null_count():
        return ids.is_first_distinct()
    if ids.is_sorted():
        return ids.ne_missing(ids.shift(1))
    lo, hi = int(ids.min()), int(ids.max())  # type: ignore[arg-type]
    if (hi - lo + 1) * n >= 1 << 62:
        return ids.is_first_distinct()
    packed = ((ids.cast(pl.Int64) - lo) * n + pl.int_range(n, dtype=pl.Int64, eager=True)).sort()
    run = packed // n
    rows = (packed % n).filter(run.ne_missing(run.shift(1)))
    return pl.zeros(n, dtype=pl.Int8, eager=True).scatter(rows, 1).cast(pl.Boolean)  # Int8: scatter in any order
