"""core.threads.in_order: results in the items' order, few held at once, a stop cancels what has not started."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from traceattr.core.threads import in_order


def test_results_come_in_the_items_order_when_later_ones_end_first() -> None:
    # the first item takes longest: a pool that handed results as they end would put it last
    def slow_first(i: int) -> tuple[int, str]:
        time.sleep(0.05 if i == 0 else 0.0)
        return i, threading.current_thread().name

    got = list(in_order(slow_first, range(6), 3, "t-order"))
    assert [i for i, _ in got] == list(range(6))
    assert all(name.startswith("t-order") for _, name in got)  # computed on the pool's threads


def test_one_thread_runs_on_the_callers_thread() -> None:
    names = list(in_order(lambda _i: threading.current_thread().name, range(3), 1, "t-one"))
    assert names == [threading.current_thread().name] * 3


def test_items_are_drawn_only_as_they_start() -> None:
    drawn: list[int] = []

    def items() -> Iterator[int]:
        for i in range(100):
            drawn.append(i)
            yield i

    results = in_order(lambda i: i * 2, items(), 2, "t-lazy")
    assert next(results) == 0
    # two in flight when the first is taken (the first and the next), one more once it was handed over
    assert len(drawn) <= 3, drawn
    results.close()
    assert len(drawn) <= 3, drawn


def test_an_error_ends_the_run_and_later_items_do_not_start() -> None:
    started: list[int] = []

    def fail_on_one(i: int) -> int:
        started.append(i)
        if i == 1:
            raise ValueError("item 1")
        return i

    results = in_order(fail_on_one, range(50), 2, "t-error")
    assert next(results) == 0
    with pytest.raises(ValueError, match="item 1"):
        next(results)
    assert max(started) <= 3, started  # the rest were never submitted
    assert not [t for t in threading.enumerate() if t.name.startswith("t-error")]


def test_closing_early_waits_for_the_running_items_and_leaves_no_thread() -> None:
    ended: list[int] = []
    gate = threading.Event()

    def held(i: int) -> int:
        if i > 0:
            gate.wait(timeout=5)
        ended.append(i)
        return i

    results = in_order(held, range(10), 2, "t-close")
    assert next(results) == 0
    threading.Timer(0.05, gate.set).start()
    results.close()  # the caller stops: the item under way ends, none after it starts
    assert ended[0] == 0 and set(ended[1:]) <= {1, 2}, ended
    assert not [t for t in threading.enumerate() if t.name.startswith("t-close")]
