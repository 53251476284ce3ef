"""Reading processes for the ``sqlite3`` fallback: a batch of queries run in :mod:`sqlite_worker` processes.

Python's ``sqlite3`` makes a Python object of every value under the GIL, so threads do not add cores to
it; processes do. Each worker is a fresh interpreter running the standard-library-only worker script
(``python -I -S``: ~20 ms and ~10 MB to start; nothing is forked from this process, which may run
polars' thread pool; multiprocessing's spawn would also re-import the program's ``__main__``), opens the
export read-only itself and sends back compact columns. One thread here per worker feeds it the queries,
biggest first, and hands each answer to a callback as it arrives.

Nothing here is needed for a correct result: a worker that cannot start, dies or fails a query leaves
that query unread (None), and the caller reads it in its own process (where an error in the file then
surfaces exactly as it always has).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import marshal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

WORKER_SCRIPT = Path(__file__).with_name("sqlite_worker.py")
_log = logging.getLogger("traceattr")


def worker_command() -> list[str]:
    """The command that starts one reading process (a test replaces it to make workers fail)."""
    return [sys.executable, "-I", "-S", str(WORKER_SCRIPT)]


def read_in_processes(
    uri: str, sqls: Sequence[str], order: Sequence[int], processes: int, take: Callable[[int, Any], Any]
) -> list[Any]:
    """``take(i, answer)`` for each ``sqls[i]`` read by one of *processes* workers, started in *order*;
    None where a query was not read there (no worker could start, one died, the query failed).

    *answer* is the worker's ``(rows, columns)`` (:mod:`sqlite_worker`). A stop request (Ctrl-C,
    SIGTERM: a KeyboardInterrupt here) or an error ends every worker before it propagates.
    """
    results: list[Any] = [None] * len(sqls)
    workers = _start(processes)
    if not workers:
        return results
    pending = collections.deque(order)
    lock = threading.Lock()

    def feed(proc: subprocess.Popen[bytes]) -> None:
        requests, answers = proc.stdin, proc.stdout
        assert requests is not None and answers is not None
        try:
            if not _handshake(requests, answers, uri):
                return
            while True:
                with lock:
                    if not pending:
                        return
                    i = pending.popleft()
                marshal.dump(sqls[i], requests)
                requests.flush()
                answer = marshal.load(answers)
                if answer[0] == "ok":
                    rows, width = answer[1:]
                    results[i] = take(i, (rows, [marshal.load(answers) for _ in range(width)]))
                else:  # read again by the caller, whose error it then is
                    _log.debug("a reading process failed a query (%s): read in this process", answer[1])
        except (OSError, EOFError, ValueError, TypeError) as err:  # the worker died: its other queries go on elsewhere
            _log.info("a reading process stopped (%s): its reads are done elsewhere", type(err).__name__)

    pool = ThreadPoolExecutor(len(workers), thread_name_prefix="traceattr-read")
    try:
        futures = [pool.submit(feed, proc) for proc in workers]
        for future in futures:
            future.result()
    finally:
        with lock:
            pending.clear()  # after a stop, threads take nothing more
        _kill(workers)  # done, or stopping: a thread waiting on its worker then sees the pipe close
        pool.shutdown(wait=True, cancel_futures=True)
        _reap(workers)
    return results


def _start(processes: int) -> list[subprocess.Popen[bytes]]:
    """Up to *processes* workers; as many as could start (none in a sandbox that forbids it)."""
    workers: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(processes):
            workers.append(
                subprocess.Popen(
                    worker_command(),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,  # a worker never writes to the user's terminal
                )
            )
    except OSError as err:
        _log.info("cannot start a reading process (%s): reading in this process", err)
    except BaseException:
        _kill(workers)
        _reap(workers)
        raise
    return workers


def _handshake(requests: IO[bytes], answers: IO[bytes], uri: str) -> bool:
    marshal.dump(uri, requests)
    requests.flush()
    answer = marshal.load(answers)
    # the same SQLite library reads the same values; another one (a strange environment) is not used
    return bool(answer[0] == "ready" and answer[1] == sqlite3.sqlite_version)


def _kill(workers: list[subprocess.Popen[bytes]]) -> None:
    """End every worker now (after the last query a closed stdin would end it too, but a stop cannot wait)."""
    for proc in workers:
        with contextlib.suppress(OSError):
            proc.kill()


def _reap(workers: list[subprocess.Popen[bytes]]) -> None:
    """Close the pipes of ended workers and collect their exit (no zombie stays)."""
    for proc in workers:
        for pipe in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
