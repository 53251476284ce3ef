"""traceattr.attribution.launches: from a GPU op to the runtime rows that launched it (joined on process and
correlationId), and from those to the ranges holding them."""

from __future__ import annotations

import polars as pl
import pytest

from traceattr.attribution.intervals import RangeIndex
from traceattr.attribution.launches import launches_of, locate

PID_A, PID_B = 1 << 24, 2 << 24  # globalTid = <PID:24><TID:24>; an op's globalPid has the TID zeroed
TID_A, TID_B = PID_A + 5, PID_B + 9


def ops(rows: list[tuple[int, int | None, int]]) -> pl.DataFrame:
    """(op_id, global_pid, correlation_id)."""
    return pl.DataFrame(rows, schema={"op_id": pl.Int64, "global_pid": pl.Int64, "correlation_id": pl.Int64},
                        orient="row")  # fmt: skip


def api(rows: list[tuple[int, int, int, int, int]]) -> pl.DataFrame:
    """(api_id, global_tid, correlation_id, start, end)."""
    return pl.DataFrame(rows, schema={"api_id": pl.Int64, "global_tid": pl.Int64, "correlation_id": pl.Int64,
                                      "start": pl.Int64, "end": pl.Int64}, orient="row")  # fmt: skip


def found(frame: pl.DataFrame) -> set[tuple]:
    return set(frame.select("op_id", "api_id", "api_start", "api_end", "global_tid").iter_rows())


def test_correlation_ids_are_per_process() -> None:
    gpu = ops([(0, PID_A, 7), (1, PID_B, 7), (2, PID_A, 8)])
    calls = api([(10, TID_A, 7, 100, 110), (11, TID_B, 7, 200, 210), (12, TID_A, 8, 300, 310)])
    # the same id 7 in two processes: each op finds its own process's call, never the other's
    assert found(launches_of(gpu, calls)) == {(0, 10, 100, 110, TID_A), (1, 11, 200, 210, TID_B),
                                              (2, 12, 300, 310, TID_A)}  # fmt: skip


def test_ops_without_a_process_join_on_the_id_alone() -> None:
    gpu = ops([(0, None, 7), (1, None, 9)])
    calls = api([(10, TID_A, 7, 100, 110)])
    assert found(launches_of(gpu, calls)) == {(0, 10, 100, 110, TID_A)}  # op 1 has no call: no row


@pytest.mark.parametrize("repeated", [True, False])
def test_one_process_by_lookup_or_join_alike(repeated: bool) -> None:
    gpu = ops([(0, PID_A, 7), (1, PID_A, 8), (2, PID_A, 99)])
    calls = api([(10, TID_A, 7, 100, 110), (11, TID_A, 8, 120, 130)])
    assert found(launches_of(gpu, calls, repeated=repeated)) == {(0, 10, 100, 110, TID_A), (1, 11, 120, 130, TID_A)}


def test_a_call_logged_twice_keeps_both_rows() -> None:
    gpu = ops([(0, PID_A, 7)])
    calls = api([(10, TID_A, 7, 100, 130), (11, TID_A, 7, 105, 125)])  # old exports: two rows, one id
    assert found(launches_of(gpu, calls)) == {(0, 10, 100, 130, TID_A), (0, 11, 105, 125, TID_A)}


RANGES = pl.DataFrame(
    {"range_id": [1, 2, 3], "global_tid": [TID_A] * 3, "start": [0, 90, 102], "end": [1000, 140, 128]}
)


def test_locate_gives_every_holding_range_and_the_deepest() -> None:
    launches = launches_of(ops([(0, PID_A, 7), (1, PID_A, 8)]), api([(10, TID_A, 7, 100, 130),
                                                                       (11, TID_A, 8, 500, 510)]))  # fmt: skip
    every, deepest = locate(RangeIndex(RANGES), launches, dedupe=False)
    assert set(every.iter_rows()) == {(0, 1, 100), (0, 2, 100), (1, 1, 500)}
    assert set(deepest.iter_rows()) == {(0, 2, 100), (1, 1, 500)}


def test_locate_merges_the_rows_of_a_call_logged_twice_keeping_the_earlier_start() -> None:
    # row 10 [100,130] is in ranges 1 and 2; row 11 [105,125] also in 3: the op is in each range once
    launches = launches_of(ops([(0, PID_A, 7)]), api([(10, TID_A, 7, 100, 130), (11, TID_A, 7, 105, 125)]))
    every, deepest = locate(RangeIndex(RANGES), launches, dedupe=True)
    assert sorted(every.iter_rows()) == [(0, 1, 100), (0, 2, 100), (0, 3, 105)]
    assert sorted(deepest.iter_rows()) == [(0, 2, 100), (0, 3, 105)]  # one deepest range per row, then merged
