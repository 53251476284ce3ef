"""traceattr.attribution.intervals: same-thread containment (nsys's rule, bounds inclusive), the range tree,
and interval unions, on small hand-made ranges whose answers can be read off a drawing."""

from __future__ import annotations

import itertools

import polars as pl

from traceattr.attribution.intervals import RangeIndex, contained_pairs, union_length

T1, T2 = 101, 202  # two threads


def ranges(*rows: tuple[int, int, int, int]) -> pl.DataFrame:
    """(range_id, global_tid, start, end) rows."""
    return pl.DataFrame(rows, schema={"range_id": pl.Int64, "global_tid": pl.Int64, "start": pl.Int64,
                                      "end": pl.Int64}, orient="row")  # fmt: skip


def calls(*rows: tuple[int, int, int, int]) -> pl.DataFrame:
    return ranges(*rows).rename({"range_id": "call_id"})


# thread T1 is laminar (push/pop): 1 [0,100] holds 2 [10,50] holds 3 [20,30]; 4 [60,90] is 1's second child
LAMINAR = ranges((1, T1, 0, 100), (2, T1, 10, 50), (3, T1, 20, 30), (4, T1, 60, 90))
# thread T2 is not: 5 [0,50] and 6 [25,75] overlap without nesting; 7 [30,40] lies in both
CROSSED = ranges((5, T2, 0, 50), (6, T2, 25, 75), (7, T2, 30, 40))


def pairs_of(frame: pl.DataFrame, a: str = "call_id", b: str = "range_id") -> set[tuple[int, int]]:
    return set(frame.select(a, b).iter_rows())


def test_tree_of_a_laminar_thread_is_its_nesting() -> None:
    tree = {r["range_id"]: r for r in RangeIndex(LAMINAR).tree().iter_rows(named=True)}
    assert {i: (r["parent_id"], r["level"], r["root_id"]) for i, r in tree.items()} == {
        1: (None, 0, 1), 2: (1, 1, 1), 3: (2, 2, 1), 4: (1, 1, 1),
    }  # fmt: skip


def test_tree_of_overlapping_ranges_takes_the_tightest_container() -> None:
    tree = {r["range_id"]: r for r in RangeIndex(CROSSED).tree().iter_rows(named=True)}
    # 5 and 6 hold 7 equally tightly (10 ns of slack each): the higher range_id wins, as the laminar walk's
    assert (tree[5]["parent_id"], tree[6]["parent_id"], tree[7]["parent_id"]) == (None, None, 6)
    assert (tree[7]["level"], tree[7]["root_id"]) == (1, 6)


def test_locate_finds_every_holding_range_and_the_deepest() -> None:
    index = RangeIndex(pl.concat([LAMINAR, CROSSED]))
    c = calls(
        (10, T1, 22, 28),  # in 3, 2, 1
        (11, T1, 0, 100),  # exactly 1's bounds: inside (inclusive)
        (12, T1, 55, 58),  # between 2 and 4: only 1
        (13, T2, 31, 39),  # in 7, 5 and 6
        (14, T2, 60, 70),  # only 6
        (15, T1, 95, 105),  # reaches past 1's end: in nothing
        (16, 303, 22, 28),  # a thread without ranges
    )
    every, deepest = index.locate(c)
    assert pairs_of(every) == {(10, 3), (10, 2), (10, 1), (11, 1), (12, 1), (13, 7), (13, 5), (13, 6), (14, 6)}
    assert pairs_of(deepest) == {(10, 3), (11, 1), (12, 1), (13, 7), (14, 6)}
    # without ancestors, the laminar thread's pairs are left out of every (subtrees answer for them)
    every_general, deepest_again = index.locate(c, ancestors=False)
    assert pairs_of(every_general) == {(13, 7), (13, 5), (13, 6), (14, 6)}
    assert pairs_of(deepest_again) == pairs_of(deepest)


def test_ranges_and_calls_without_a_thread_are_ignored() -> None:
    no_thread = {"global_tid": pl.lit(None, pl.Int64)}
    index = RangeIndex(pl.concat([LAMINAR, ranges((9, T1, 0, 1000)).with_columns(**no_thread)]))
    assert 9 not in index.tree()["range_id"].to_list()
    c = pl.concat([calls((10, T1, 22, 28)), calls((11, T1, 22, 28)).with_columns(**no_thread)])
    every, deepest = index.locate(c)
    assert pairs_of(every) == {(10, 3), (10, 2), (10, 1)} and pairs_of(deepest) == {(10, 3)}


def test_subtrees_number_ranges_in_preorder() -> None:
    sub = {r["range_id"]: (r["first"], r["stop"]) for r in RangeIndex(LAMINAR).subtrees().iter_rows(named=True)}
    # preorder 1, 2, 3, 4: 1 holds all four, 2 holds itself and 3, 3 and 4 only themselves
    assert sub == {1: (0, 4), 2: (1, 3), 3: (2, 3), 4: (3, 4)}
    assert RangeIndex(CROSSED).subtrees().height == 0  # no laminar thread


def test_ancestors_expand_a_range_to_every_range_holding_it() -> None:
    index = RangeIndex(LAMINAR)
    pairs = pl.DataFrame({"op_id": [0, 1], "range_id": [3, 4]})
    assert pairs_of(index.ancestors(pairs, "op_id"), "op_id") == {(0, 3), (0, 2), (0, 1), (1, 4), (1, 1)}


def test_contained_pairs_match_a_brute_force_on_one_thread_each() -> None:
    inner = calls(*[(i, T1 if i % 2 else T2, s, s + w) for i, (s, w) in enumerate(itertools.product(range(0, 60, 7),
                                                                                                     (0, 5, 30)))])  # fmt: skip
    outer = pl.concat([LAMINAR, CROSSED])
    got = pairs_of(contained_pairs(inner, outer, inner_id="call_id", outer_id="range_id"))
    want = {
        (c["call_id"], r["range_id"])
        for c in inner.iter_rows(named=True)
        for r in outer.iter_rows(named=True)
        if c["global_tid"] == r["global_tid"] and r["start"] <= c["start"] and c["end"] <= r["end"]
    }
    assert got == want and want  # and the case holds pairs at all
    assert contained_pairs(inner.clear(), outer, inner_id="call_id", outer_id="range_id").height == 0


def test_contained_pairs_far_apart_in_time_join_thread_by_thread() -> None:
    far = 1 << 61  # two threads this far apart cannot share one folded axis
    inner = calls((1, T1, 5, 6), (2, T2, far + 5, far + 6))
    outer = ranges((10, T1, 0, 10), (20, T2, far, far + 10), (30, T2, 0, 10))
    assert pairs_of(contained_pairs(inner, outer, inner_id="call_id", outer_id="range_id")) == {(1, 10), (2, 20)}


def test_union_length_counts_overlaps_once_per_group() -> None:
    df = pl.DataFrame({"g": [1, 1, 1, 2, 2, 3], "start": [0, 5, 20, 0, 5, 7], "end": [10, 15, 25, 5, 8, 7]})
    got = dict(union_length(df, "g").iter_rows())
    # g1: [0,15] ∪ [20,25] = 20; g2: touching [0,5] ∪ [5,8] = 8; g3: one empty interval = 0
    assert got == {1: 20, 2: 8, 3: 0}
    assert union_length(df.clear(), "g").columns == ["g", "busy_ns"]


def test_union_length_of_groups_too_wide_for_one_axis_is_the_same() -> None:
    far = 1 << 40
    df = pl.DataFrame({"g": [0, 0, far, far], "start": [0, 2, far, far + 1], "end": [4, 6, far + 3, far + 2]})
    assert dict(union_length(df, "g").iter_rows()) == {0: 6, far: 3}
