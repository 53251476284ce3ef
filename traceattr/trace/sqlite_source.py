"""Read-only access to an SQLite file, returning polars frames.

Two engines, same results: ADBC (Arrow-native, ~3x faster than row fetching;
used when ``adbc-driver-sqlite`` is installed) and the standard library's
``sqlite3`` (always there, e.g. on a GPU box that only carries polars). The
fallback's rows become Python objects under the GIL, where more threads only
fight over it: a big read goes to worker processes instead (one per CPU, up to
8: :mod:`traceattr.trace.sqlite_processes`), a small one stays on this thread;
it says once that it is the slow path.
The file is opened ``mode=ro&immutable=1`` (as ``nsysstats.py`` does): nothing
is ever written, no journal or lock file is created beside it.

Text is read as bytes and decoded here, so an export holding bytes that are
not UTF-8 (old nsys versions copy raw environment text) cannot break polars.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import logging
import os
import re
import sqlite3
import stat
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from traceattr.core.cpus import usable_cpus
from traceattr.core.errors import TraceError, TraceNote
from traceattr.trace.sqlite_processes import read_in_processes
from traceattr.trace.typed import misfit, text_of, typed_frame

if TYPE_CHECKING:
    from polars._typing import PolarsDataType  # a DataType or its class: schemas here hold classes (pl.Int64)

try:  # optional fast path; the low-level API, not adbc's DB-API module, which imports pyarrow (~0.3 s)
    import adbc_driver_manager as _adbc
    import adbc_driver_sqlite as _adbc_sqlite
except ImportError:  # pragma: no cover - exercised on machines without ADBC
    _adbc = None  # type: ignore[assignment]  # an optional import: None says it is absent

_SQLITE_MAGIC = b"SQLite format 3\x00"
# rows per parallel read of a big table (see SqliteSource.row_chunks). 64 k, not 128 k: on 16 cores the
# nested trace's kernel table came in 3 chunks for 8 threads and its biggest chunk set the load's end (load
# 0.32-0.36 -> 0.24-0.26 s on the H200 host; 2 cores: no change, same peak). Below 64 k it did not pay
ROWS_PER_CHUNK = 65_536
_BATCH_ROWS = "adbc.sqlite.query.batch_rows"
# A rowid takes at least this many bytes of the file (cell pointer, sizes, rowid, record header), so a
# table holds at most file size / this many rows: a rowid span beyond that cannot be dense
_MIN_BYTES_PER_ROW = 4
_SPANS_PER_QUERY = 500  # rowid spans OR-ed in one query of a restricted read (SqliteSource.only)


def _rowids_in(spans: list[tuple[int, int]]) -> str:
    """The SQL condition true on the rowids of the inclusive *spans* (none: false)."""
    return "(" + (" OR ".join(f"rowid BETWEEN {a} AND {b}" for a, b in spans) or "0") + ")"


# values (rows x columns) for one more sqlite3 worker process: ~0.15 s of reading in this process
PROCESS_VALUES = 500_000
_log = logging.getLogger("traceattr")
_slow_path_said = False


def reading_threads(engine: str) -> int:
    """Threads that make reads faster with *engine*: ADBC decodes in C with the GIL released (up to
    8, as the CPUs allow); Python's ``sqlite3`` builds every value as a Python object under the GIL,
    where a second thread only adds contention (2 cores: 1 thread is faster; 16: 36 s against ~3): a big
    read goes to worker processes instead (:func:`reading_processes`)."""
    return max(1, min(usable_cpus(), 8)) if engine == "adbc" else 1


def reading_processes(values: int) -> int:
    """Worker processes that make the ``sqlite3`` fallback's reads of *values* values (rows x columns)
    faster: one per usable CPU, up to 8 (as ADBC's threads), and one per :data:`PROCESS_VALUES` at most,
    so that each reads for longer than it takes to start (~30 ms); none where that leaves fewer than two
    (one worker would only move the reading). ``TRACEATTR_READ_PROCESSES`` overrides it (0: read in this
    process), to measure."""
    forced = os.environ.get("TRACEATTR_READ_PROCESSES", "").strip()
    if forced.isdigit():
        return int(forced)
    processes = min(usable_cpus(), 8, values // PROCESS_VALUES)
    return processes if processes >= 2 else 0


def read_only_uri(path: Path) -> str:
    """``file:`` URI that opens *path* read-only and immutable."""
    return path.resolve().as_uri() + "?mode=ro&immutable=1"


def check_path(path: Path) -> None:
    """Raise :class:`TraceError` unless *path* is a readable SQLite file whose content is all in it."""
    check_file(path)
    try:
        with path.open("rb") as fh:
            head = fh.read(len(_SQLITE_MAGIC))
    except OSError as err:
        raise TraceError(path, f"cannot be read ({err.strerror})") from None
    if len(head) == 0:
        raise TraceError(path, "is an empty file, not an SQLite database")
    if head != _SQLITE_MAGIC:
        raise TraceError(path, "is not an SQLite database (wrong file header)")
    _check_companions(path)


def check_file(path: Path) -> None:
    """Raise :class:`TraceError` unless *path* is a regular file (checked before opening: a FIFO would block)."""
    try:
        st = path.stat()
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise TraceError(path, "is a symbolic link loop") from None
        if err.errno == errno.ENOENT:
            raise TraceError(
                path, "is a symbolic link to a missing file" if path.is_symlink() else "no such file"
            ) from None
        raise TraceError(path, f"cannot be read ({err.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise TraceError(path, "is a directory, expected an nsys .sqlite export")
    if not stat.S_ISREG(st.st_mode):
        raise TraceError(path, "is not a regular file (a pipe, socket or device); pass an nsys export or report file")


def _journal_header(journal: Path) -> bool:
    """Whether *journal* starts with a header (its first byte not zero), as SQLite decides a journal is hot."""
    with journal.open("rb") as fh:
        return fh.read(1) not in (b"", b"\x00")


def _check_companions(path: Path) -> None:
    """Refuse a file whose content is partly beside it: opened immutable, SQLite would ignore it."""
    for suffix, problem in (
        ("-wal", "has a write-ahead log beside it ({name}, {size:,} bytes) holding changes not yet in the file; "
                 "merge them with `sqlite3 {path} 'PRAGMA wal_checkpoint'` (or export again)"),
        ("-journal", "has a rollback journal beside it ({name}): a writer stopped mid-transaction and the file "
                     "may hold half its changes; open it once with sqlite3 to roll them back, or export again"),
    ):  # fmt: skip
        side = path.with_name(path.name + suffix)
        try:
            size = side.stat().st_size if side.is_file() else 0
            # SQLite's own rule: a rollback journal whose header is zeroed (journal_mode=PERSIST after a
            # commit) or empty (TRUNCATE) is not hot and is ignored; only one with a header is rolled back
            hot = size > 0 and (suffix != "-journal" or _journal_header(side))
        except OSError:
            continue
        if hot:
            raise TraceError(path, problem.format(name=side.name, size=size, path=path))


# tables whose rowid the loader reads (NVTX_EVENTS' rowid is the range id, as nsys's RangeId)
ROWID_TABLES = frozenset({"NVTX_EVENTS"})


@dataclass(frozen=True)
class Query:
    """One read: numeric columns typed by *schema*, or (key, text) when *text*.

    A text query must filter out NULL text itself and select it as
    ``CAST(col AS BLOB)``: ADBC infers a column's type from its first rows,
    which breaks on a text column that starts NULL.
    """

    sql: str
    schema: Mapping[str, PolarsDataType]
    what: str
    text: bool = False
    rows: int = 0  # rows it will return, as far as known: read_all starts the biggest reads first


class SqliteSource:
    """One export, opened read-only; knows its tables and columns."""

    def __init__(self, path: str | Path, engine: str = "auto") -> None:
        self.path = Path(path)
        check_path(self.path)
        if engine not in ("auto", "adbc", "sqlite3"):
            raise ValueError(f"engine must be auto, adbc or sqlite3, got {engine!r}")
        if engine == "adbc" and _adbc is None:
            raise ValueError("engine 'adbc' needs the adbc-driver-sqlite package")
        self.engine = "adbc" if engine in ("auto", "adbc") and _adbc is not None else "sqlite3"
        if engine == "auto" and self.engine == "sqlite3":
            _say_slow_path()
        self._uri = read_only_uri(self.path)
        self._conn = self._connect_sqlite3()
        with self._translate_errors("reading the table list"):
            rows = self._conn.execute("SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
        self.tables: frozenset[str] = frozenset(text_of(r[0]) for r in rows)
        views = {text_of(r[0]) for r in rows if text_of(r[1]) == "view"}
        for name in sorted(views & ROWID_TABLES):  # a view has no rowid: refused by name, not as "no such column"
            raise TraceError(self.path, f"{name} is a view; traceattr numbers its rows by rowid, which only a table "
                                        "has (nsys writes a table): export again or make it a table")  # fmt: skip
        self._columns: dict[str, tuple[str, ...]] = {}
        # table -> the rowid spans read of it (load_rows): its chunks are those spans, not the whole table
        self.only: dict[str, list[tuple[int, int]]] = {}
        self._local = threading.local()  # one connection per reading thread
        self._opened: list[Any] = []
        self._lock = threading.Lock()

    # -- connections -----------------------------------------------------
    def _connect_sqlite3(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self._uri, uri=True, check_same_thread=False)
        except sqlite3.Error as err:
            raise TraceError(self.path, f"cannot be opened as SQLite ({err})") from None
        conn.text_factory = bytes  # decode ourselves (see module doc)
        return conn

    def close(self) -> None:
        self._conn.close()
        with self._lock:
            for conn in reversed(self._opened):  # an ADBC connection before its database
                # after a Ctrl-C a reader thread may still hold a statement: closing then must not
                # replace the interrupt with ADBC's complaint (the process is leaving anyway)
                with contextlib.suppress(Exception):
                    conn.close()
            self._opened.clear()
        self._local = threading.local()

    def __enter__(self) -> SqliteSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _translate_errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as err:
            raise TraceError(self.path, _describe_sqlite_error(err, what)) from None
        except pl.exceptions.ComputeError as err:  # ADBC errors surface here
            raise TraceError(self.path, _describe_sqlite_error(err, what)) from None
        except Exception as err:
            if _adbc is not None and isinstance(err, _adbc.Error):
                raise TraceError(self.path, _describe_sqlite_error(err, what)) from None
            raise

    # -- schema ----------------------------------------------------------
    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> tuple[str, ...]:
        if table not in self._columns:
            with self._translate_errors(f"reading the columns of {table}"):
                rows = self._conn.execute(f"PRAGMA table_info('{table}')").fetchall()
            self._columns[table] = tuple(text_of(r[1]) for r in rows)
        return self._columns[table]

    def has_column(self, table: str, column: str) -> bool:
        return self.has(table) and column in self.columns(table)

    # -- reading ---------------------------------------------------------
    def read(self, query: Query) -> pl.DataFrame:
        """Run one query on this thread's connection."""
        with self._translate_errors(query.what):
            if self.engine == "adbc":
                # one query is one rowid chunk (row_chunks): its int64 buffers are
                # narrowed right away, so a whole table's never pile up. The Arrow
                # stream goes straight into polars (PyCapsule), without pyarrow.
                statement = _adbc.AdbcStatement(self._thread_conn())
                try:
                    # one Arrow batch per chunk: at the driver's default (1,024 rows) the per-batch
                    # work was a fifth of a million-row read
                    statement.set_options(**{_BATCH_ROWS: str(ROWS_PER_CHUNK)})
                    statement.set_sql_query(query.sql)
                    stream, _ = statement.execute_query()
                    raw = pl.DataFrame(stream)
                finally:
                    statement.close()
            else:
                rows = self._thread_conn().execute(query.sql).fetchall()
                # text arrives as bytes (text_factory): decoded by _typed
                try:
                    raw = _columns_of(rows, list(query.schema))
                except (pl.exceptions.PolarsError, TypeError, OverflowError, ValueError):
                    raise TraceError(self.path, misfit(_as_text(rows, query), query.schema, query.what)) from None
        try:
            typed = self._typed(raw, query)
        except pl.exceptions.PolarsError:
            raise TraceError(self.path, misfit(raw, query.schema, query.what)) from None
        if self.engine == "adbc" and typed.height > 1:  # Python's sqlite3 rows became polars' own columns already
            typed = _owned(
                typed, [c for c, was in zip(typed.columns, raw.dtypes, strict=True) if typed[c].dtype == was]
            )
        return typed

    @staticmethod
    def _typed(raw: pl.DataFrame, query: Query) -> pl.DataFrame:
        if raw.height == 0 or raw.width == 0:
            return pl.DataFrame(schema=dict(query.schema))
        raw.columns = list(query.schema)
        return typed_frame(raw, query.schema)

    def read_all(self, queries: Sequence[Query]) -> list[pl.DataFrame]:
        """Run *queries* on a small thread pool (SQLite decoding releases the GIL), in their order;
        through ``sqlite3``, in worker processes when there is enough to read (:func:`reading_processes`)."""
        if self.engine == "sqlite3":
            processes = min(len(queries), reading_processes(sum(q.rows * len(q.schema) for q in queries)))
            if processes:
                return self._read_in_processes(queries, processes)
        workers = max(1, min(len(queries), reading_threads(self.engine)))
        _log.info("%s: %d reads through %s on %d thread(s)", self.path.name, len(queries), self.engine, workers)
        if workers == 1:
            frames = [self.read(q) for q in queries]
            _return_freed_heap()
            return frames
        # biggest first (values to fetch, the cost of a read): a big chunk started last would
        # leave the other threads idle at the end
        by_size = sorted(range(len(queries)), key=lambda i: -queries[i].rows * len(queries[i].schema))
        pool = ThreadPoolExecutor(workers, thread_name_prefix="traceattr-read")
        try:
            running = {i: pool.submit(self.read, queries[i]) for i in by_size}
            frames = [running[i].result() for i in range(len(queries))]
        finally:  # after a failure or Ctrl-C, reads not yet started are dropped, not run
            pool.shutdown(wait=True, cancel_futures=True)
        _return_freed_heap()
        return frames

    def _read_in_processes(self, queries: Sequence[Query], processes: int) -> list[pl.DataFrame]:
        """*queries* read by *processes* worker processes (:mod:`traceattr.trace.sqlite_processes`), each
        answer made a frame as it arrives; what they did not read (a worker that failed to start or died, an
        error in the file, values that do not fit) is read here, in order, as on one thread: same frames,
        same errors."""
        _log.info("%s: %d reads through sqlite3 on %d worker processes", self.path.name, len(queries), processes)
        # biggest first, and first of all those of unknown size (StringIds, NVTX text): the sweep's 500 k
        # strings are its longest read, and started last they would leave the other processes idle
        order = sorted(
            range(len(queries)), key=lambda i: (queries[i].rows > 0, -queries[i].rows * len(queries[i].schema))
        )
        read = read_in_processes(
            self._uri, [q.sql for q in queries], order, processes, lambda i, answer: _frame_of(answer, queries[i])
        )
        frames = [frame if frame is not None else self.read(q) for frame, q in zip(read, queries, strict=True)]
        _return_freed_heap()
        return frames

    def within(self, table: str) -> str:
        """`` AND (rowid BETWEEN …)``: the condition that keeps a query of *table* to its rows read (:attr:`only`);
        empty when the whole table is."""
        return f" AND {_rowids_in(self.only[table])}" if table in self.only else ""

    def row_chunks(self, table: str, rows_per_chunk: int = ROWS_PER_CHUNK) -> list[tuple[str, int]]:
        """``rowid`` conditions splitting *table* into chunks of about *rows_per_chunk* rows for
        parallel reads, with the rows each holds at most.

        The chunks follow the rows, not the rowid values: a rowid is a value in the file, and one
        row at rowid 2**62 (or -2**62) must not turn into trillions of chunks. nsys numbers rows
        densely, so rowid spans are the chunks when the span could be dense (no wider than the rows
        the file can hold: the chunk count is then bounded by the file's size); otherwise the
        boundaries are found by stepping *rows_per_chunk* rows at a time through the rowid b-tree
        (one pass over its leaves, ~0.05 s per 300 k rows)."""
        if table in self.only:  # rowid spans: SQLite seeks each in the rowid b-tree (a multi-index OR)
            spans = self.only[table]
            return [
                (_rowids_in(part), sum(b - a + 1 for a, b in part))
                for part in (spans[i : i + _SPANS_PER_QUERY] for i in range(0, len(spans), _SPANS_PER_QUERY))
            ] or [("0", 0)]
        # two queries: SQLite answers a lone min(rowid) or max(rowid) from the b-tree's
        # edge, but scans the whole table for both in one SELECT
        lo = self.scalar_rows(f'SELECT min(rowid) FROM "{table}"', f"sizing {table}")[0][0]
        hi = self.scalar_rows(f'SELECT max(rowid) FROM "{table}"', f"sizing {table}")[0][0]
        if lo is None:
            return [("1", 0)]
        if hi - lo < max(os.path.getsize(self.path) // _MIN_BYTES_PER_ROW, rows_per_chunk):
            return [
                (f"rowid BETWEEN {a} AND {min(a + rows_per_chunk - 1, hi)}", min(rows_per_chunk, hi - a + 1))
                for a in range(lo, hi + 1, rows_per_chunk)
            ]
        starts = [lo]
        while True:  # the first rowid of the next chunk: as many queries as chunks
            step = f'SELECT rowid FROM "{table}" WHERE rowid >= {starts[-1]} ORDER BY rowid LIMIT 1 OFFSET {rows_per_chunk}'
            row = self.scalar_rows(step, f"sizing {table}")
            if not row:
                break
            starts.append(row[0][0])
        bounds = [f"rowid >= {a} AND rowid < {b}" for a, b in itertools.pairwise(starts)]
        return [(c, rows_per_chunk) for c in [*bounds, f"rowid >= {starts[-1]}"]]

    def _thread_conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            opened: list[Any] = []
            if self.engine == "adbc":
                opened.append(_adbc_sqlite.connect(self._uri))
                conn = _adbc.AdbcConnection(opened[0])
            else:
                conn = self._connect_sqlite3()
            self._local.conn = conn
            with self._lock:
                self._opened += [*opened, conn]
        return conn

    def rows(self, table: str, columns: Sequence[str], what: str) -> list[tuple[Any, ...]]:
        """A small table's rows (metadata), *columns* in order, None where the table lacks one."""
        listed = ", ".join(f'"{c}"' if self.has_column(table, c) else "NULL" for c in columns)
        return self.scalar_rows(f'SELECT {listed} FROM "{table}"', what)

    def scalar_rows(self, sql: str, what: str) -> list[tuple[Any, ...]]:
        """Small queries (metadata): plain rows, bytes decoded to str."""
        with self._translate_errors(what):
            rows = self._conn.execute(sql).fetchall()
        return [tuple(text_of(v) if isinstance(v, bytes) else v for v in row) for row in rows]


def _return_freed_heap() -> None:
    """Give the C heap's free pages back to the system once the reads are done (glibc only; ~1 ms).

    What the reads freed there (SQLite's pages and row buffers, the ADBC driver's batches) stays resident
    otherwise: glibc returns memory from the top of a heap only, and the polars frames made meanwhile sit
    above it. Reading on one thread (the sqlite3 fallback) left 80 MB so on the nested trace.
    """
    with contextlib.suppress(OSError, AttributeError):  # not glibc (macOS, musl): nothing to do
        ctypes.CDLL(None).malloc_trim(0)


def _columns_of(rows: list[tuple[Any, ...]], names: list[str]) -> pl.DataFrame:
    """Python's sqlite3 rows as a frame, built a column at a time (a third of the CPU of polars' row
    constructor, which was a third of the fallback's load).

    Each column's type is inferred over all its values, as ADBC does: a REAL among integers must show as
    a float column (_typed refuses fractions), not be truncated by an integer schema. A column mixing
    BLOBs and numbers, which the row constructor refused, is refused here too (TypeError).
    """
    if not rows:
        return pl.DataFrame(rows, schema=names, orient="row")
    # one pass of itemgetter over the rows per column: zip(*rows) makes an iterator per row, twice as slow
    columns = [pl.Series(name, list(map(itemgetter(i), rows)), strict=False) for i, name in enumerate(names)]
    if any(column.dtype == pl.Object for column in columns):
        raise TypeError("a column holds values of no one type")
    return pl.DataFrame(columns)


def _frame_of(answer: tuple[int, list[tuple[Any, ...]]], query: Query) -> pl.DataFrame | None:
    """A worker's answer as the frame :meth:`SqliteSource.read` makes of the same rows; None where that
    read would fail, so that the caller reads it again and raises its error."""
    try:
        raw = columns_of_worker(answer, list(query.schema))
        typed = SqliteSource._typed(raw, query)
    except (pl.exceptions.PolarsError, TypeError, OverflowError, ValueError):
        return None
    # a column the cast left alone still views the worker's bytes (numpy, no copy): copied into polars'
    # own memory, as ADBC's batches are, those bytes are freed as soon as the answer is a frame
    if typed.height <= 1:
        return typed
    return _owned(typed, [c for c, was in zip(typed.columns, raw.dtypes, strict=True) if typed[c].dtype == was])


def columns_of_worker(answer: tuple[int, list[tuple[Any, ...]]], names: list[str]) -> pl.DataFrame:
    """A worker's columns (:mod:`traceattr.trace.sqlite_worker`) as the frame :func:`_columns_of` makes of
    the same rows: the same types, inferred over every value; TypeError where it refuses them."""
    import numpy as np  # only here: the one-thread path and ADBC never need it

    rows, columns = answer
    if rows == 0:
        return _columns_of([], names)
    series = []
    for name, (kind, *data) in zip(names, columns, strict=True):
        if kind == "l":  # text, BLOBs, mixed types: as _columns_of builds it
            column = pl.Series(name, data[0], strict=False)
        elif kind == "n":
            column = pl.Series(name, [None] * rows, strict=False)  # a NULL-only column's type: Null
        else:
            values, valid = data
            column = pl.Series(name, np.frombuffer(values, np.int64 if kind == "q" else np.float64))
            if valid is not None:
                column = column.set(~pl.Series(np.frombuffer(valid, np.bool_)), None)
        series.append(column)
    if any(column.dtype == pl.Object for column in series):
        raise TypeError("a column holds values of no one type")
    return pl.DataFrame(series)


def _owned(frame: pl.DataFrame, borrowed: list[str]) -> pl.DataFrame:
    """*frame* with its *borrowed* columns copied into polars' own memory.

    An Arrow stream from ADBC arrives without a copy: a column whose cast changed nothing (an INTEGER
    read as Int64) still lives in the driver's batch, in the C heap, and keeps the whole batch there
    while any of its columns lives. Copied now, chunk by chunk, each batch is freed as soon as it is
    read, so the driver's heap holds a chunk or two, not the export (sweep: load peak 830 -> 630 MB),
    and no copy of whole frames is needed afterwards. Two slices concatenated with ``rechunk`` are
    polars' way to copy a column (a cast to the same type, a clone or a rechunk of one chunk share it).
    """
    return frame.with_columns(pl.concat([frame[c].slice(0, 1), frame[c].slice(1)], rechunk=True) for c in borrowed)


def _say_slow_path() -> None:
    """Once per process: ADBC is missing, so reads take Python's sqlite3 (several times slower)."""
    global _slow_path_said
    if not _slow_path_said:
        _slow_path_said = True
        warnings.warn(
            TraceNote(
                "adbc-driver-sqlite is not installed: reading through Python's sqlite3, slower (several times on "
                "few cores; pip install adbc-driver-sqlite adbc-driver-manager)"
            ),
            stacklevel=3,
        )


def _as_text(rows: list[Any], query: Query) -> pl.DataFrame:
    """Rows that would not build typed columns, every value as text (to find the culprit)."""
    text = [[None if v is None else text_of(v) if isinstance(v, bytes) else str(v) for v in r] for r in rows]
    return pl.DataFrame(text, schema=dict.fromkeys(query.schema, pl.String), orient="row")


def _describe_sqlite_error(err: BaseException, what: str) -> str:
    msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    # ADBC wraps SQLite's words: "INVALID_ARGUMENT: [SQLite] Failed to prepare query: no such table: t"
    msg = re.sub(r"^(?:[A-Z_]+: )?\[SQLite\] (?:Failed to (?:prepare|execute) query: )?", "", msg) or msg
    low = msg.lower()
    if "malformed" in low or "not a database" in low or "disk i/o" in low or "corrupt" in low:
        return f"the SQLite file is damaged or truncated ({msg}) while {what}"
    return f"SQLite error while {what}: {msg}"
