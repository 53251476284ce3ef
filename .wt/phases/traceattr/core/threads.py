"""Work spread over a few threads, with results in order (polars and ADBC release the GIL in their kernels)."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def in_order(fn: Callable[[T], R], items: Iterable[T], threads: int, name: str) -> Iterator[R]:
    """``fn(item)`` for each of *items*, in their order, computed on up to *threads* threads.

    At most *threads* results are computed ahead of the one the caller takes, and *items* is drawn only
    as they start, so what is held grows with *threads*, not with the number of items. One thread: no pool,
    everything on the caller's thread. A caller that stops early (an error, a stop signal, ``close()``)
    cancels what has not started and waits for what has.
    """
    if threads <= 1:
        yield from map(fn, items)
        return
    pending = iter(items)
    ahead: deque[Future[R]] = deque()
    pool = ThreadPoolExecutor(threads, thread_name_prefix=name)
    try:
        while True:
            for item in itertools.islice(pending, threads - len(ahead)):  # draw only what can start
                ahead.append(pool.submit(fn, item))
            if not ahead:
                return
            yield ahead.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
