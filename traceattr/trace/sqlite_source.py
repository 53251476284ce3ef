"""Read-only access to an SQLite file, returning polars frames.

Two engines, same results: ADBC (Arrow-native, ~3x faster than row fetching;
used when ``adbc-driver-sqlite`` is installed) and the standard library's
``sqlite3`` (always there, e.g. on a GPU box that only carries polars).
The file is opened ``mode=ro&immutable=1`` (as ``nsysstats.py`` does): nothing
is ever written, no journal or lock file is created beside it.

Text is read as bytes and decoded here, so an export holding bytes that are
not UTF-8 (old nsys versions copy raw environment text) cannot break polars.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

from traceattr.errors import TraceError

try:  # optional fast path
    import adbc_driver_sqlite.dbapi as _adbc
except ImportError:  # pragma: no cover - exercised on machines without ADBC
    _adbc = None

_SQLITE_MAGIC = b"SQLite format 3\x00"


def read_only_uri(path: Path) -> str:
    """``file:`` URI that opens *path* read-only and immutable."""
    return path.resolve().as_uri() + "?mode=ro&immutable=1"


def check_path(path: Path) -> None:
    """Raise :class:`TraceError` unless *path* is a readable SQLite file."""
    if not path.exists():
        raise TraceError(path, "no such file")
    if path.is_dir():
        raise TraceError(path, "is a directory, expected an nsys .sqlite export")
    try:
        with path.open("rb") as fh:
            head = fh.read(len(_SQLITE_MAGIC))
    except OSError as err:
        raise TraceError(path, f"cannot be read ({err.strerror})") from None
    if len(head) == 0:
        raise TraceError(path, "is an empty file, not an SQLite database")
    if head != _SQLITE_MAGIC:
        raise TraceError(path, "is not an SQLite database (wrong file header)")


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
        self._uri = read_only_uri(self.path)
        self._conn = self._connect_sqlite3()
        with self._translate_errors("reading the table list"):
            rows = self._conn.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
            ).fetchall()
        self.tables: frozenset[str] = frozenset(_text(r[0]) for r in rows)
        self._columns: dict[str, tuple[str, ...]] = {}
        self._adbc_conn: Any = None

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
        if self._adbc_conn is not None:
            self._adbc_conn.close()
            self._adbc_conn = None

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
            self._columns[table] = tuple(_text(r[1]) for r in rows)
        return self._columns[table]

    def has_column(self, table: str, column: str) -> bool:
        return self.has(table) and column in self.columns(table)

    # -- reading ---------------------------------------------------------
    def frame(self, sql: str, schema: Mapping[str, pl.DataType], what: str) -> pl.DataFrame:
        """Run *sql* (numeric columns only) and return it typed as *schema*.

        Text columns must go through :meth:`text_frame`: ADBC infers a column's
        type from its first rows, which breaks on a text column that starts NULL.
        """
        with self._translate_errors(what):
            if self.engine == "adbc":
                df = pl.read_database(sql, self._adbc())
                if df.width == 0 or df.height == 0:
                    return pl.DataFrame(schema=dict(schema))
                df.columns = list(schema)
            else:
                rows = self._conn.execute(sql).fetchall()
                return pl.DataFrame(rows, schema=dict(schema), orient="row")
        return df.cast(dict(schema))

    def text_frame(self, sql: str, key: str, key_dtype: pl.DataType, value: str, what: str) -> pl.DataFrame:
        """Run *sql* returning (key, text) rows with text never NULL; decode text.

        The query must filter out NULL text itself (``WHERE col IS NOT NULL``)
        and select it as ``CAST(col AS BLOB)``.
        """
        with self._translate_errors(what):
            if self.engine == "adbc":
                raw = pl.read_database(sql, self._adbc())
                if raw.height == 0:
                    return pl.DataFrame(schema={key: key_dtype, value: pl.String})
                raw.columns = [key, value]
                raw = raw.with_columns(pl.col(key).cast(key_dtype))
            else:
                rows = self._conn.execute(sql).fetchall()
                raw = pl.DataFrame(rows, schema={key: key_dtype, value: pl.Binary}, orient="row")
        return raw.with_columns(decode_utf8(raw[value]).alias(value))

    def _adbc(self) -> Any:
        if self._adbc_conn is None:
            self._adbc_conn = _adbc.connect(self._uri)
        return self._adbc_conn

    def scalar_rows(self, sql: str, what: str) -> list[tuple[Any, ...]]:
        """Small queries (metadata): plain rows, bytes decoded to str."""
        with self._translate_errors(what):
            rows = self._conn.execute(sql).fetchall()
        return [tuple(_text(v) if isinstance(v, bytes) else v for v in row) for row in rows]


def decode_utf8(values: pl.Series) -> pl.Series:
    """Binary → String; invalid UTF-8 becomes U+FFFD instead of an error."""
    if values.dtype == pl.String:
        return values
    try:
        return values.cast(pl.String)
    except pl.exceptions.ComputeError:
        # Rare (old exports); only then pay for a per-value decode.
        return pl.Series(values.name, [_text(v) if v is not None else None for v in values.to_list()], pl.String)


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _describe_sqlite_error(err: BaseException, what: str) -> str:
    msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    low = msg.lower()
    if "malformed" in low or "not a database" in low or "disk i/o" in low or "corrupt" in low:
        return f"the SQLite file is damaged or truncated ({msg}) while {what}"
    return f"SQLite error while {what}: {msg}"
