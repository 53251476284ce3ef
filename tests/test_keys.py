"""Row lookups by key (traceattr/keys.py) answer what a left join answers."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from traceattr.core.keys import first_of_id, group_numbers, rows_at, scatter_rows

keys = st.lists(st.integers(-5, 40), unique=True, max_size=12) | st.lists(
    st.integers(-(10**12), 10**12), unique=True, max_size=12
)  # dense keys take the position table, sparse ones the binary search


@settings(deadline=None)  # the session's first polars calls may outlast hypothesis' 200 ms on a busy machine
@given(keys=keys, ids=st.lists(st.none() | st.integers(-10, 50), max_size=15), sort=st.booleans())
def test_rows_at_equals_left_join(keys: list[int], ids: list[int | None], sort: bool) -> None:
    keys = sorted(keys) if sort else keys
    frame = pl.DataFrame(
        {"k": keys, "v": [k * 3 for k in keys], "s": [f"x{k}" for k in keys]},
        schema={"k": pl.Int64, "v": pl.Int64, "s": pl.String},
    )
    wanted = pl.Series("k", ids + keys[:3], pl.Int64)  # some ids that exist whatever the draw
    want = wanted.to_frame().join(frame, on="k", how="left", maintain_order="left").drop("k")
    assert_frame_equal(rows_at(frame, "k", wanted), want)


@settings(deadline=None)  # a first polars call may outlast hypothesis' 200 ms on a busy machine
@given(
    lo=st.integers(-5, 5), n=st.integers(1, 12), ids=st.none() | st.lists(st.none() | st.integers(-8, 20), max_size=15)
)
def test_rows_at_contiguous_keys(lo: int, n: int, ids: list[int | None] | None) -> None:
    """Keys lo, lo + 1, … in order (row ids) are offsets; asked in the frame's own order, the frame itself."""
    frame = pl.DataFrame(
        {"k": range(lo, lo + n), "v": [k * 3 for k in range(lo, lo + n)]}, schema={"k": pl.Int64, "v": pl.Int64}
    )
    wanted = pl.Series("k", list(range(lo, lo + n)) if ids is None else ids, pl.Int64)
    want = wanted.to_frame().join(frame, on="k", how="left", maintain_order="left").drop("k")
    assert_frame_equal(rows_at(frame, "k", wanted), want)


@settings(deadline=None)  # a first polars call may outlast hypothesis' 200 ms on a busy machine
@given(ids=st.lists(st.none() | st.integers(-3, 6), max_size=20) | st.lists(st.integers(-(10**9), 10**9), max_size=20),
       sort=st.booleans())  # fmt: skip
def test_first_of_id_equals_is_first_distinct(ids: list[int | None], sort: bool) -> None:
    series = pl.Series("id", ids, pl.Int64)
    series = series.sort() if sort else series
    assert first_of_id(series).to_list() == series.is_first_distinct().to_list()


@given(rows=st.lists(st.integers(0, 20), unique=True, max_size=10))
def test_scatter_rows_places_each_row_at_its_key(rows: list[int]) -> None:
    frame = pl.DataFrame({"k": rows, "v": [r + 100 for r in rows]}, schema={"k": pl.Int64, "v": pl.Int64})
    out = scatter_rows(frame, "k", 21)
    assert out["v"].to_list() == [r + 100 if r in rows else None for r in range(21)]


@settings(deadline=None)  # a first polars call may outlast hypothesis' 200 ms on a busy machine
@given(rows=st.permutations(list(range(6))))
def test_scatter_rows_of_every_row(rows: list[int]) -> None:
    """Every row named once (in order: the frame as it is; shuffled: moved)."""
    frame = pl.DataFrame({"k": rows, "v": [r + 100 for r in rows]}, schema={"k": pl.Int64, "v": pl.Int64})
    assert scatter_rows(frame, "k", 6)["v"].to_list() == [r + 100 for r in range(6)]


def test_group_numbers_tell_pairs_apart_nulls_too() -> None:
    frame = pl.DataFrame(
        {"shape": ["a", "a", "b", None, None, "a"], "backend": ["x", "y", "x", "x", None, "x"]},
        schema={"shape": pl.String, "backend": pl.String},
    )
    distinct, number = group_numbers(frame, ("shape", "backend"))
    # one number per distinct pair (a null one of its own), the pairs in the order first seen
    assert number.n_unique() == 5 and number[0] == number[5]
    assert distinct.select("shape", "backend").rows() == [("a", "x"), ("a", "y"), ("b", "x"), (None, "x"), (None, None)]
    assert (
        frame.with_columns(number)
        .join(distinct, on="_g")
        .filter(
            pl.col("shape").ne_missing(pl.col("shape_right")) | pl.col("backend").ne_missing(pl.col("backend_right"))
        )
        .height
        == 0
    )
