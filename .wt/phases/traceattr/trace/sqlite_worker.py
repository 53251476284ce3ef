"""A reading process of the ``sqlite3`` fallback: runs queries on one export and sends back columns.

Started by :mod:`traceattr.trace.sqlite_processes` as ``python -I -S sqlite_worker.py``: it uses the
standard library only (no polars, not even site-packages), so it starts in ~20 ms and ~10 MB. Python's
``sqlite3`` builds a Python object per value under the GIL: reading in several such processes is what
lets the fallback use more than one core.

Protocol, :mod:`marshal` over stdin/stdout (built in: pickle's imports would double the start-up; both
ends are the same interpreter): the parent sends the export's read-only URI, the worker answers
``("ready", sqlite_version)``; then each SQL text is answered by ``("ok", rows, width)`` and *width*
columns, one message each (never a second copy of a whole chunk), or by ``("error", message)``, until
stdin closes. A column is sent compactly, not as a Python object per value:
``("q", int64 bytes, mask)`` for integers, ``("d", float64 bytes, mask)`` for numbers with a REAL among
them (each integer as ``float()`` makes it, as polars does for such a column), ``("n",)`` for a column of
NULLs only, and ``("l", values)`` (a plain list) for anything else (text and BLOBs as bytes, a column
mixing types); *mask* is one byte per row (1 = a value, 0 = NULL) or None when no value is NULL. Its
type is so decided over every value of the column, the inference the in-process reader leaves to polars.
"""

from __future__ import annotations

import array
import marshal
import signal
import sqlite3
import sys
from itertools import repeat
from operator import is_not, itemgetter

TYPE_CHECKING = False  # typing's import is a third of this process's start-up: only for the checker
if TYPE_CHECKING:
    from typing import Any, BinaryIO

BATCH_ROWS = 8192  # rows fetched at a time: the process holds a batch of Python rows, not a whole chunk's
_ZERO_FOR_NULL = {None: 0}  # .get(v, v): a NULL becomes 0 (masked), any other value stays itself


class _Column:
    """One result column, built a batch at a time: int64 until a REAL appears, float64 until a value
    that is not a number appears, then a plain list (what the in-process reader would have had)."""

    def __init__(self) -> None:
        self.values: array.array[Any] | list[Any] = array.array("q")
        self.mask: bytearray | None = None  # None: no NULL so far

    def add(self, values: list[Any], before: int) -> None:
        if isinstance(self.values, list):
            self.values += values
            return
        numbers = values
        nulls = values.count(None)
        if nulls:
            if self.mask is None:
                self.mask = bytearray(b"\x01") * before
            self.mask += bytes(map(is_not, values, repeat(None)))
            numbers = list(map(_ZERO_FOR_NULL.get, values, values))
        elif self.mask is not None:
            self.mask += b"\x01" * len(values)
        try:
            self.values.fromlist(numbers)  # unchanged when it fails
            return
        except TypeError:
            pass
        if self.values.typecode == "q" and set(map(type, numbers)) <= {int, float}:
            self.values = array.array("d", self.values)
            self.values.fromlist(numbers)
            return
        self.values = self._as_list(self.values) + values

    def _as_list(self, numbers: array.array[Any]) -> list[Any]:
        values = numbers.tolist()
        if self.mask is not None:
            values = [
                v if valid else None for v, valid in zip(values, self.mask, strict=False)
            ]  # the mask may hold the batch being added
            self.mask = None
        return values

    def payload(self) -> tuple[Any, ...]:
        if isinstance(self.values, list):
            return ("l", self.values)
        if self.mask is not None and self.mask.count(1) == 0:
            return ("n",)
        return (self.values.typecode, self.values, self.mask)  # marshal writes an array as its bytes


def read(conn: sqlite3.Connection, sql: str) -> tuple[int, list[_Column]]:
    cursor = conn.execute(sql)
    columns = [_Column() for _ in cursor.description or ()]
    rows = 0
    while batch := cursor.fetchmany(BATCH_ROWS):
        for i, column in enumerate(columns):
            column.add(list(map(itemgetter(i), batch)), rows)
        rows += len(batch)
    return rows, columns


def serve(requests: BinaryIO, answers: BinaryIO) -> None:
    try:
        uri = marshal.load(requests)
    except EOFError:
        return
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    conn.text_factory = bytes  # as the in-process reader: text is decoded by the parent
    marshal.dump(("ready", sqlite3.sqlite_version), answers)
    answers.flush()
    while True:
        try:
            sql = marshal.load(requests)
        except EOFError:
            return
        try:
            rows, columns = read(conn, sql)
        except (sqlite3.Error, MemoryError, ValueError, OverflowError) as err:
            marshal.dump(("error", f"{type(err).__name__}: {err}"), answers)
            answers.flush()
            continue
        marshal.dump(("ok", rows, len(columns)), answers)
        while columns:  # each column let go of once sent
            marshal.dump(columns.pop(0).payload(), answers)
        answers.flush()


def main() -> None:
    # the parent stops this process (Ctrl-C at a terminal reaches the whole process group, SIGHUP too):
    # a KeyboardInterrupt here would only print a traceback
    for name in ("SIGINT", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    try:
        serve(sys.stdin.buffer, sys.stdout.buffer)
    except OSError:  # the parent has gone (a broken pipe)
        return


if __name__ == "__main__":
    main()
